#pragma once
// CSV as RFC 4180 has it, for every file eldrsim writes or reads back: a field holding a comma, a
// double quote, CR or LF is quoted, its quotes doubled; other fields are written as they are (so
// plain files stay byte-identical). Python's csv module, pandas and spreadsheets read them back.
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace eldr {

// Whether `field` must be quoted.
bool csv_needs_quotes(std::string_view field);

// Appends `field`, quoted if it must be (no separator).
void csv_append_field(std::string& out, std::string_view field);

// Appends a separator (unless `row` is empty) and `field`.
void csv_cell(std::string& row, std::string_view field);

// Reads one record (which may span lines inside quotes) into `cells`; false at the end of input.
// A lone CR before a line's LF is dropped (CRLF files). Sets `unterminated` when the input ends
// inside a quoted field (a file cut short); `lines` counts the physical lines read.
bool csv_read_record(std::istream& in, std::vector<std::string>& cells, long& lines, bool& unterminated);

// The cells of one complete line (no line break inside; quotes honoured).
std::vector<std::string> csv_split_line(std::string_view line);

}  // namespace eldr
