// SigV4 against AWS's worked S3 examples ("Signature Calculations for the
// Authorization Header: Transferring Payload in a Single Chunk"). Every
// expected value was also recomputed with Python's hmac/hashlib.
#include "s3/sigv4.h"

#include <gtest/gtest.h>

namespace cairn::s3 {
namespace {

constexpr char kEmptyHash[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr char kHost[] = "examplebucket.s3.amazonaws.com";

SigningParams ExampleParams() {
  SigningParams p;
  p.access_key = "AKIAIOSFODNN7EXAMPLE";
  p.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  p.region = "us-east-1";
  p.amz_date = "20130524T000000Z";
  return p;
}

// Aggregate initialisation throughout: member-wise assignment of short
// strings trips g++ 12's -O3 -Wmaybe-uninitialized/-Wstringop-overflow.
SigningRequest GetObjectExample() {
  return SigningRequest{"GET",
                        "/test.txt",
                        {},
                        {{"Host", kHost},
                         {"Range", "bytes=0-9"},
                         {"x-amz-content-sha256", kEmptyHash},
                         {"x-amz-date", "20130524T000000Z"}},
                        kEmptyHash};
}

TEST(SigV4Test, EmptyPayloadHash) { EXPECT_EQ(Sha256Hex({}), kEmptyHash); }

TEST(SigV4Test, SigningKeyOfExample) {
  EXPECT_EQ(ToHex(AsBytes(SigningKey(ExampleParams()))),
            "dbb893acc010964918f1fd433add87c70e8b0db6be30c1fbeafefa5ec6ba8378");
}

TEST(SigV4Test, GetObjectWithRangeExample) {
  SigningRequest r = GetObjectExample();
  EXPECT_EQ(CanonicalRequest(r),
            "GET\n/test.txt\n\n"
            "host:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
            "x-amz-date:20130524T000000Z\n\n"
            "host;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(StringToSign(CanonicalRequest(r), ExampleParams()),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  EXPECT_EQ(Signature(r, ExampleParams()),
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  EXPECT_EQ(AuthorizationHeader(r, ExampleParams()),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
            "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, PutObjectExample) {
  const std::string body = "Welcome to Amazon S3.";
  const std::string hash = Sha256Hex(AsBytes(body));
  EXPECT_EQ(hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  // '$' must be encoded in the canonical URI.
  const SigningRequest r{"PUT",
                         "/test$file.text",
                         {},
                         {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                          {"Host", kHost},
                          {"x-amz-date", "20130524T000000Z"},
                          {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                          {"x-amz-content-sha256", hash}},
                         hash};
  EXPECT_NE(CanonicalRequest(r).find("\n/test%24file.text\n"), std::string::npos);
  EXPECT_EQ(StringToSign(CanonicalRequest(r), ExampleParams()),
            "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
            "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
  EXPECT_EQ(Signature(r, ExampleParams()),
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4Test, GetBucketLifecycleExample) {
  const SigningRequest r{"GET",
                         "/",
                         {{"lifecycle", ""}},
                         {{"Host", kHost},
                          {"x-amz-date", "20130524T000000Z"},
                          {"x-amz-content-sha256", kEmptyHash}},
                         kEmptyHash};
  EXPECT_EQ(CanonicalQuery(r.query), "lifecycle=");
  EXPECT_EQ(Signature(r, ExampleParams()),
            "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4Test, ListObjectsExample) {
  const SigningRequest r{"GET",
                         "/",
                         {{"prefix", "J"}, {"max-keys", "2"}},  // sorted by the signer
                         {{"Host", kHost},
                          {"x-amz-date", "20130524T000000Z"},
                          {"x-amz-content-sha256", kEmptyHash}},
                         kEmptyHash};
  EXPECT_EQ(CanonicalQuery(r.query), "max-keys=2&prefix=J");
  EXPECT_EQ(Signature(r, ExampleParams()),
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4Test, UriEncodingRules) {
  EXPECT_EQ(UriEncode("aZ09-_.~", false), "aZ09-_.~");
  EXPECT_EQ(UriEncode("a b+c/d=e&f", false), "a%20b%2Bc%2Fd%3De%26f");
  EXPECT_EQ(UriEncode("a b/c", true), "a%20b/c");
  EXPECT_EQ(UriEncode("\xc3\xa9*", false), "%C3%A9%2A");
  EXPECT_EQ(CanonicalUri(""), "/");
  EXPECT_EQ(CanonicalUri("/bucket/dir//x y"), "/bucket/dir//x%20y");  // no normalisation
  EXPECT_EQ(CanonicalQuery({{"b", "2"}, {"a", "x/y"}, {"continuation-token", "1/+="}}),
            "a=x%2Fy&b=2&continuation-token=1%2F%2B%3D");
}

TEST(SigV4Test, HeaderValuesTrimmedAndNamesLowered) {
  const SigningRequest r{"GET",
                         "/k",
                         {},
                         {{"X-Amz-Date", "  20130524T000000Z "}, {"HOST", "h"}, {"X-Meta", "a   b\t c"}},
                         std::string(kUnsignedPayload)};
  EXPECT_EQ(CanonicalRequest(r),
            "GET\n/k\n\nhost:h\nx-amz-date:20130524T000000Z\nx-meta:a b c\n\n"
            "host;x-amz-date;x-meta\nUNSIGNED-PAYLOAD");
}

TEST(SigV4Test, AmzDateFormat) {
  EXPECT_EQ(AmzDate(1369353600), "20130524T000000Z");
  EXPECT_EQ(AmzDate(0), "19700101T000000Z");
}

}  // namespace
}  // namespace cairn::s3
