#include "s3/s3_xml.h"

#include <gtest/gtest.h>

#include "s3/s3_protocol.h"

namespace cairn::s3 {
namespace {

TEST(XmlTest, ParsesNestedElementsAndProlog) {
  auto doc = ParseXml(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- c -->"
      "<A xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><B>one</B><C><B>two</B></C><D/>"
      "<E attr='x>y/'>t<!-- skip -->u</E></A>\n");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->name, "A");
  EXPECT_EQ(doc->ChildText("B"), "one");  // the direct child, not C's
  ASSERT_NE(doc->Child("C"), nullptr);
  EXPECT_EQ(doc->Child("C")->ChildText("B"), "two");
  ASSERT_NE(doc->Child("D"), nullptr);
  EXPECT_EQ(doc->Child("D")->text, "");
  EXPECT_EQ(doc->ChildText("E"), "tu");
  EXPECT_EQ(doc->Child("missing"), nullptr);
  EXPECT_EQ(doc->ChildText("missing"), "");
}

TEST(XmlTest, DecodesEntitiesAndCdata) {
  auto doc = ParseXml("<K>a&amp;b&lt;c&gt;d&quot;e&apos;f&#65;&#x42;&#xe9;&#x1F600;<![CDATA[<&x]]></K>");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ(doc->text, "a&b<c>d\"e'fAB\xc3\xa9\xf0\x9f\x98\x80<&x");
}

TEST(XmlTest, RejectsBadEntities) {
  for (const char* bad : {"a&b", "&unknown;", "&#;", "&#x;", "&#0;", "&#xD800;", "&#x110000;",
                          "&#12a;", "&amp", "&#99999999999;"}) {
    EXPECT_FALSE(DecodeXmlEntities(bad).ok()) << bad;
  }
  EXPECT_EQ(*DecodeXmlEntities("plain"), "plain");
}

TEST(XmlTest, RejectsMalformedDocuments) {
  for (const char* bad : {
           "", "   ", "text", "<A>", "<A></B>", "<A><B></A></B>", "<A>x</A>trailing",
           "<A></A><B></B>", "<A attr=\"unterminated></A>", "<A><B>1<B></A>", "<>x</>",
           "<!DOCTYPE A [<!ENTITY x \"y\">]><A>&x;</A>", "<A><!-- open </A>",
           "<A><![CDATA[ open </A>", "<A>a<b</A>", "<A/ >", "<?xml", "<A>&bogus;</A>"}) {
    auto doc = ParseXml(bad);
    EXPECT_FALSE(doc.ok()) << "accepted: " << bad;
  }
}

TEST(XmlTest, LimitsDepth) {
  std::string deep;
  for (int i = 0; i < kMaxXmlDepth + 1; ++i) deep += "<a>";
  for (int i = 0; i < kMaxXmlDepth + 1; ++i) deep += "</a>";
  EXPECT_FALSE(ParseXml(deep).ok());
  std::string ok;
  for (int i = 0; i < kMaxXmlDepth; ++i) ok += "<a>";
  for (int i = 0; i < kMaxXmlDepth; ++i) ok += "</a>";
  EXPECT_TRUE(ParseXml(ok).ok());
}

TEST(XmlTest, EscapeRoundTrips) {
  std::string s = "a&b<c>d\"e'f";
  auto back = DecodeXmlEntities(EscapeXml(s));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, s);
}

constexpr char kListPage[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Name>bucket</Name><Prefix>dir/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>
  <Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>
  <Contents><Key>dir/a&amp;b.txt</Key><LastModified>2026-12-01T00:00:00.000Z</LastModified>
    <ETag>&quot;abc&quot;</ETag><Size>1234</Size><StorageClass>STANDARD</StorageClass></Contents>
  <Contents><Key>dir/&lt;x&gt;&#233;</Key><Size>0</Size></Contents>
  <CommonPrefixes><Prefix>dir/sub/</Prefix></CommonPrefixes>
  <CommonPrefixes><Prefix>dir/sub2/</Prefix></CommonPrefixes>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
</ListBucketResult>)";

TEST(XmlTest, ParsesListObjectsV2Page) {
  auto page = ParseListObjectsV2(kListPage);
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "dir/a&b.txt");
  EXPECT_EQ(page->objects[0].size, 1234u);
  EXPECT_EQ(page->objects[0].etag, "abc");  // quotes dropped
  EXPECT_EQ(page->objects[1].etag, "");
  EXPECT_EQ(page->objects[1].key, "dir/<x>\xc3\xa9");
  EXPECT_EQ(page->common_prefixes, (std::vector<std::string>{"dir/sub/", "dir/sub2/"}));
  EXPECT_TRUE(page->is_truncated);
  EXPECT_EQ(page->next_continuation_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
}

TEST(XmlTest, ListObjectsV2LastAndEmptyPages) {
  auto page = ParseListObjectsV2(
      "<ListBucketResult><Name>b</Name><Prefix></Prefix><KeyCount>0</KeyCount>"
      "<IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->objects.empty());
  EXPECT_FALSE(page->is_truncated);
}

TEST(XmlTest, ListObjectsV2RejectsBadPages) {
  for (const char* bad : {
           "<Error><Code>x</Code></Error>",
           "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
           "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents></ListBucketResult>",
           "<ListBucketResult><Contents><Key>k</Key><Size>1x</Size></Contents></ListBucketResult>",
           "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
           "<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
           "<ListBucketResult><CommonPrefixes></CommonPrefixes></ListBucketResult>",
           "<ListBucketResult><Contents><Key>a</Key></Contents>",
       }) {
    EXPECT_FALSE(ParseListObjectsV2(bad).ok()) << bad;
  }
}

TEST(XmlTest, ParsesErrorBody) {
  std::string body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchKey</Code>"
      "<Message>The key &apos;x&apos; does not exist</Message><Resource>/b/x</Resource>"
      "<RequestId>tx1</RequestId></Error>";
  S3ErrorBody e = ParseErrorBody(AsBytes(body));
  EXPECT_EQ(e.code, "NoSuchKey");
  EXPECT_EQ(e.message, "The key 'x' does not exist");
  EXPECT_EQ(e.resource, "/b/x");
  EXPECT_EQ(e.request_id, "tx1");
  // Ceph RGW's error bodies carry Code, BucketName, RequestId, HostId only.
  e = ParseErrorBody(AsBytes(std::string_view(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchBucket</Code>"
      "<BucketName>nb</BucketName><RequestId>tx2</RequestId><HostId>h</HostId></Error>")));
  EXPECT_EQ(e.code, "NoSuchBucket");
  EXPECT_EQ(e.message, "");
  // Not XML, or another root: empty fields, no crash.
  EXPECT_EQ(ParseErrorBody(AsBytes(std::string_view("<html>502 Bad Gateway</html"))).code, "");
  EXPECT_EQ(ParseErrorBody(AsBytes(std::string_view("<Other><Code>x</Code></Other>"))).code, "");
  EXPECT_EQ(ParseErrorBody({}).code, "");
}

TEST(XmlTest, DeleteObjectsBodiesBothWays) {
  std::vector<std::string> keys = {"a", "b&<c>", "d'\""};
  EXPECT_EQ(BuildDeleteObjectsBody(keys),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Delete><Quiet>true</Quiet>"
            "<Object><Key>a</Key></Object><Object><Key>b&amp;&lt;c&gt;</Key></Object>"
            "<Object><Key>d&apos;&quot;</Key></Object></Delete>");
  auto failures = ParseDeleteResult(
      "<DeleteResult><Deleted><Key>a</Key></Deleted><Error><Key>b&amp;c</Key>"
      "<Code>AccessDenied</Code><Message>no</Message></Error></DeleteResult>");
  ASSERT_TRUE(failures.ok()) << failures.status().ToString();
  ASSERT_EQ(failures->size(), 1u);
  EXPECT_EQ((*failures)[0].key, "b&c");
  EXPECT_EQ((*failures)[0].code, "AccessDenied");
  EXPECT_EQ((*failures)[0].message, "no");
  EXPECT_TRUE(ParseDeleteResult("<DeleteResult/>")->empty());
  EXPECT_FALSE(ParseDeleteResult("<DeleteResult><Error></DeleteResult>").ok());
  EXPECT_FALSE(ParseDeleteResult("<ListBucketResult/>").ok());
}

}  // namespace
}  // namespace cairn::s3
