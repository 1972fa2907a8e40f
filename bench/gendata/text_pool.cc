#include "gendata/text_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <set>
#include <string_view>

namespace cairn::bench {
namespace {

constexpr std::string_view kLetters = "etaoinshrdlcumwfgypbvkjxqz";
constexpr std::array<double, 26> kLetterWeights = {12.7, 9.1, 8.2, 7.5, 7.0,  6.7,  6.3, 6.1, 6.0,
                                                   4.3,  4.0, 2.8, 2.8, 2.4,  2.4,  2.2, 2.0, 2.0,
                                                   1.9,  1.5, 1.0, 0.8, 0.15, 0.15, 0.1, 0.07};
constexpr std::array<std::string_view, 11> kPuncts = {". ", ", ", " ",   " ", " ", " ",
                                                      "; ", ": ", " = ", "(", ") "};
constexpr std::array<std::string_view, 6> kLevels = {"INFO",  "INFO", "INFO",
                                                     "DEBUG", "WARN", "ERROR"};

std::vector<std::string> MakeVocabulary(Rng& rng, int count) {
  std::set<std::string> unique;
  while (unique.size() < static_cast<size_t>(count)) {
    std::string w;
    int len = static_cast<int>(rng.Between(1, 11));
    for (int i = 0; i < len; ++i) w += kLetters[rng.Pick(kLetterWeights)];
    unique.insert(std::move(w));
  }
  std::vector<std::string> words(unique.begin(), unique.end());  // sorted
  rng.Shuffle(words);
  return words;
}

std::string Join(const std::vector<const std::string*>& ws, size_t from, size_t to,
                 std::string_view sep) {
  std::string out;
  for (size_t i = from; i < to && i < ws.size(); ++i) {
    if (i > from) out += sep;
    out += *ws[i];
  }
  return out;
}

}  // namespace

TextPool::TextPool(uint64_t seed, int words, int lines) {
  Rng rng(seed);
  std::vector<std::string> vocab = MakeVocabulary(rng, words);
  std::vector<double> cumulative;
  double acc = 0;
  for (size_t i = 0; i < vocab.size(); ++i) {
    acc += 1.0 / std::pow(static_cast<double>(i + 1), 1.05);  // Zipf-like
    cumulative.push_back(acc);
  }
  std::vector<const std::string*> ws;
  for (int i = 0; i < lines; ++i) {
    ws.clear();
    int n = static_cast<int>(rng.Between(3, 16));
    for (int k = 0; k < n; ++k) ws.push_back(&vocab[rng.PickCumulative(cumulative)]);
    double style = rng.Uniform();
    std::string line;
    if (style < 0.25) {  // log-like line
      int month = static_cast<int>(rng.Between(1, 12));
      int day = static_cast<int>(rng.Between(1, 28));
      int hour = static_cast<int>(rng.Between(0, 23));
      int minute = static_cast<int>(rng.Between(0, 59));
      int second = static_cast<int>(rng.Between(0, 59));
      int milli = static_cast<int>(rng.Between(0, 999));
      std::string_view level = kLevels[rng.Below(kLevels.size())];
      line = fmt::format("2024-{:02}-{:02} {:02}:{:02}:{:02}.{:03} {} [{}] {}\n", month, day, hour,
                         minute, second, milli, level, *ws[0], Join(ws, 1, ws.size(), " "));
    } else if (style < 0.45) {  // code-like line
      std::string indent(4 * rng.Between(0, 4), ' ');
      line = fmt::format("{}{}({}, {});\n", indent, *ws[0], Join(ws, 1, 4, ", "),
                         rng.Between(0, 99999));
    } else {  // prose-like line
      line = Join(ws, 0, ws.size(), kPuncts[rng.Below(kPuncts.size())]);
      if (!line.empty()) line[0] = static_cast<char>(std::toupper(line[0]));
      line += ".\n";
    }
    starts_.push_back(static_cast<uint32_t>(text_.size()));
    text_ += line;
  }
  starts_.push_back(static_cast<uint32_t>(text_.size()));
}

void TextPool::Fill(Rng& rng, std::span<uint8_t> out) const {
  const size_t lines = starts_.size() - 1;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t i = rng.Below(lines);
    size_t len = std::min<size_t>(starts_[i + 1] - starts_[i], out.size() - pos);
    std::memcpy(out.data() + pos, text_.data() + starts_[i], len);
    pos += len;
  }
}

double TextPool::average_line_length() const {
  return static_cast<double>(text_.size()) / static_cast<double>(starts_.size() - 1);
}

}  // namespace cairn::bench
