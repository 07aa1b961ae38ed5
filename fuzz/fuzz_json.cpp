// Structure-aware JSON: the input is a little program that builds a config far beyond the 8 KB the
// other harnesses see (up to millions of nesting levels, megabyte strings, numbers at the edges of a
// double and a long, duplicate keys), placed at a real config key or used as a --set value, then
// read by load_experiment. Only a one-line InputError may come out (no stack overflow, no hang).
#include "fuzz_common.hpp"
#include "sim/config/experiment.hpp"

#include <string>

namespace {

const char* const kEdgeNumbers[] = {"0",
                                    "-0",
                                    "1e308",
                                    "-1e308",
                                    "1.7976931348623157e308",
                                    "1e309",
                                    "-1e309",
                                    "4.9e-324",
                                    "1e-400",
                                    "9223372036854775807",
                                    "9223372036854775808",
                                    "-9223372036854775808",
                                    "-9223372036854775809",
                                    "18446744073709551615",
                                    "18446744073709551616",
                                    "1e100000000",
                                    "0.1e-2147483649",
                                    "123456789012345678901234567890",
                                    "2147483648",
                                    "-2147483649",
                                    "1.0",
                                    "60",
                                    "0.5"};
const char* const kKeys[]        = {"router",    "model",   "workload", "rate_rps", "seed",  "topology",    "decode",
                                    "instances", "serving", "eldr",     "tau",      "nodes", "description", "output"};

struct Builder {
  const uint8_t* p;
  const uint8_t* end;
  std::string out;
  size_t open = 0;
  std::string closers;

  uint8_t next() { return p < end ? *p++ : 0; }
  size_t amount() { return size_t(next()) << (next() % 15); }  // up to 255 << 14: ~4 million
  void value()
  {
    switch (next() % 9) {
    case 0:
      out += kEdgeNumbers[next() % std::size(kEdgeNumbers)];
      break;
    case 1:
      out += "\"" + std::string(amount(), char('a' + next() % 26)) + "\"";
      break;
    case 2:
      out += "null";
      break;
    case 3:
      out += next() & 1 ? "true" : "false";
      break;
    case 4:
      out += "\"" + std::string(kKeys[next() % std::size(kKeys)]) + "\"";
      break;
    case 5: {  // many levels of arrays at once
      size_t n = amount();
      out += std::string(n, '[');
      out += std::string(n, ']');
      break;
    }
    case 6: {  // many levels of objects at once
      size_t n = std::min<size_t>(amount(), 1 << 20);
      for (size_t i = 0; i < n; ++i)
        out += "{\"a\":";
      out += "1" + std::string(n, '}');
      break;
    }
    case 7: {  // a wide list
      size_t n = std::min<size_t>(amount(), 1 << 18);
      out += "[";
      for (size_t i = 0; i < n; ++i)
        out += i ? ",0" : "0";
      out += "]";
      break;
    }
    default:
      out += "{}";
      break;
    }
  }
  // An object whose members are chosen by the input; nested objects recurse (to a small depth here:
  // the deep cases above are flat text).
  void object(int depth)
  {
    out += "{";
    int members = next() % 6;
    for (int i = 0; i < members; ++i) {
      if (i)
        out += ",";
      uint8_t k = next();
      out += "\"" + std::string(kKeys[k % std::size(kKeys)]) + "\":";
      if (depth < 4 && (k & 0x80))
        object(depth + 1);
      else
        value();
    }
    out += "}";
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  if (size < 1)
    return 0;
  Builder b{data + 1, data + size, {}, 0, {}};
  const uint8_t mode = data[0];
  if (mode & 1) {
    // As a --set value of some key on the default config.
    b.value();
    const std::string key = std::string(kKeys[(mode >> 1) % std::size(kKeys)]);
    return eldr::fuzz::expect_clean([&] {
      eldr::load_experiment(std::string(ELDR_SOURCE_DIR) + "/configs/default.json", {{key, b.out}});
    });
  }
  b.object(0);
  const std::string path =
      eldr::fuzz::write_input("json_config.json", reinterpret_cast<const uint8_t*>(b.out.data()), b.out.size());
  return eldr::fuzz::expect_clean([&] { eldr::load_experiment(path); });
}
