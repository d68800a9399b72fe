// Text formats every writer shares: one CSV field rule (RFC 4180) and one way to print each kind
// of number, so that the report, the CLI's CSV and JSON outputs and the app's exports agree on
// quoting and precision.
#pragma once

#include <string>
#include <vector>

namespace analysis {

/// One CSV field, RFC 4180: wrapped in double quotes, inner quotes doubled, when it holds a
/// comma, a double quote, CR or LF; otherwise as it is.
std::string csv_field(const std::string& s);

/// The fields as one CSV record (csv_field each, joined by commas), without a line end.
std::string csv_record(const std::vector<std::string>& fields);

/// The shortest text that reads back as the same double (machine-readable outputs); empty for
/// NaN and infinities (nothing measured).
std::string exact_number(double v);

/// `digits` digits after the point ("%.*f"): tables for people.
std::string fixed_number(double v, int digits);

/// As fixed_number with a sign always shown ("%+.*f"): differences.
std::string signed_number(double v, int digits);

/// `digits` significant digits ("%.*g"); "n/a" for NaN and infinities.
std::string significant_number(double v, int digits);

}  // namespace analysis
