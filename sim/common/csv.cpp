#include "sim/common/csv.hpp"

namespace eldr {

bool csv_needs_quotes(std::string_view field)
{
  return field.find_first_of(",\"\r\n") != std::string_view::npos;
}

void csv_append_field(std::string& out, std::string_view field)
{
  if (!csv_needs_quotes(field)) {
    out += field;
    return;
  }
  out += '"';
  for (char c : field) {
    if (c == '"')
      out += '"';
    out += c;
  }
  out += '"';
}

void csv_cell(std::string& row, std::string_view field)
{
  if (!row.empty())
    row += ',';
  csv_append_field(row, field);
}

namespace {

// Splits `line` into `cells`, continuing a quoted field when `quoted` (a record over several
// lines); returns whether a quoted field is still open at the line's end.
bool split_into(std::string_view line, std::vector<std::string>& cells, bool quoted)
{
  if (cells.empty())
    cells.emplace_back();
  for (size_t i = 0; i < line.size(); ++i) {
    const char c     = line[i];
    std::string& cur = cells.back();
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"')
        cur += '"', ++i;
      else if (c == '"')
        quoted = false;
      else
        cur += c;
    } else if (c == '"')
      quoted = true;
    else if (c == ',')
      cells.emplace_back();
    else if (c != '\r' || i + 1 != line.size())  // CRLF line ends
      cur += c;
  }
  return quoted;
}

}  // namespace

bool csv_read_record(std::istream& in, std::vector<std::string>& cells, long& lines, bool& unterminated)
{
  cells.clear();
  unterminated = false;
  std::string line;
  if (!std::getline(in, line))
    return false;
  ++lines;
  bool quoted = split_into(line, cells, false);
  while (quoted) {
    if (!std::getline(in, line)) {
      unterminated = true;
      break;
    }
    ++lines;
    cells.back() += '\n';  // the line break inside the quoted field
    quoted = split_into(line, cells, true);
  }
  return true;
}

std::vector<std::string> csv_split_line(std::string_view line)
{
  std::vector<std::string> cells;
  split_into(line, cells, false);
  return cells;
}

}  // namespace eldr
