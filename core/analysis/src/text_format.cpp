// Text formats every writer shares (analysis/text_format.h).
#include "analysis/text_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace analysis {

namespace {

// snprintf into a string of the length it needs ("%.2f" of 1e300 has 303 characters).
std::string printf_text(const char* format, int digits, double v) {
    const int n = std::snprintf(nullptr, 0, format, digits, v);
    std::string out(static_cast<std::size_t>(n), '\0');
    std::snprintf(out.data(), out.size() + 1, format, digits, v);
    return out;
}

}  // namespace

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string out = "\"";
    for (char ch : s) {
        if (ch == '"') out += '"';
        out += ch;
    }
    return out + "\"";
}

std::string csv_record(const std::vector<std::string>& fields) {
    std::string out;
    for (std::size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
    return out;
}

std::string exact_number(double v) {
    if (!std::isfinite(v)) return "";
    char buf[64];
    int digits = 1;
    for (; digits < 17; ++digits) {
        std::snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);  // %.17g always reads back
    // %g writes an exponent once it reaches the precision: 120 at 2 digits is "1.2e+02". Plain
    // digits instead, as Python's repr, for exponents -4 .. 15 (integers there are exact).
    const char* e = std::strchr(buf, 'e');
    if (e != nullptr) {
        const int exponent = std::atoi(e + 1);
        if (exponent >= digits && exponent < 16) {
            char plain[64];
            std::snprintf(plain, sizeof plain, "%.*g", exponent + 1, v);
            if (std::strchr(plain, 'e') == nullptr && std::strtod(plain, nullptr) == v)
                return plain;
        }
    }
    return buf;
}

std::string fixed_number(double v, int digits) { return printf_text("%.*f", digits, v); }

std::string signed_number(double v, int digits) { return printf_text("%+.*f", digits, v); }

std::string significant_number(double v, int digits) {
    return std::isfinite(v) ? printf_text("%.*g", digits, v) : "n/a";
}

}  // namespace analysis
