// sim/common/csv: fields that need it are quoted (RFC 4180) and read back as written, over line
// breaks inside quotes; plain fields are written as they are.
#include "sim/common/csv.hpp"

#include <doctest/doctest.h>
#include <sstream>

using namespace eldr;

TEST_CASE("csv: plain fields unquoted, others quoted with doubled quotes")
{
  std::string row;
  for (const char* f : {"12", "code", "", "0.5"})
    csv_cell(row, f);
  CHECK(row == "12,code,,0.5");
  std::string q;
  for (const char* f : {"a,b", "say \"hi\"", "two\nlines", "cr\rhere", "plain"})
    csv_cell(q, f);
  CHECK(q == "\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\"cr\rhere\",plain");
}

TEST_CASE("csv: records read back as written, across lines, CRLF files")
{
  const std::vector<std::string> fields = {"id", "co,de", "ma\"th", "med\nical", "le\r\ngal", "", "x"};
  std::string text;
  std::string row;
  for (const auto& f : fields)
    csv_cell(row, f);
  text = "h1,h2\r\n" + row + "\n" + "1,2\n";
  std::istringstream in(text);
  std::vector<std::string> cells;
  long lines = 0;
  bool open  = false;
  REQUIRE(csv_read_record(in, cells, lines, open));
  CHECK(cells == std::vector<std::string>{"h1", "h2"});  // the CR of CRLF dropped
  REQUIRE(csv_read_record(in, cells, lines, open));
  CHECK(cells == fields);
  CHECK_FALSE(open);
  CHECK(lines == 4);
  REQUIRE(csv_read_record(in, cells, lines, open));
  CHECK(cells == std::vector<std::string>{"1", "2"});
  CHECK_FALSE(csv_read_record(in, cells, lines, open));
}

TEST_CASE("csv: a file cut inside a quoted field is reported")
{
  std::istringstream in("a,\"unterminated\nstill");
  std::vector<std::string> cells;
  long lines = 0;
  bool open  = false;
  REQUIRE(csv_read_record(in, cells, lines, open));
  CHECK(open);
  CHECK(csv_split_line("a,\"b,c\",d") == std::vector<std::string>{"a", "b,c", "d"});
}
