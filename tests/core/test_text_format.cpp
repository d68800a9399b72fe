// The one CSV field rule and the number formats every writer shares (analysis/text_format.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "analysis/text_format.h"

using namespace analysis;

TEST(TextFormat, CsvQuotesCommaQuoteCarriageReturnAndLineFeedOnly) {
    EXPECT_EQ(csv_field("plain text; with: punctuation"), "plain text; with: punctuation");
    EXPECT_EQ(csv_field(""), "");
    EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
    EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    EXPECT_EQ(csv_field("line\nbreak"), "\"line\nbreak\"");
    EXPECT_EQ(csv_field("windows\rline"), "\"windows\rline\"");
    EXPECT_EQ(csv_record({"run", "a,b", "1"}), "run,\"a,b\",1");
    EXPECT_EQ(csv_record({}), "");
}

TEST(TextFormat, ExactNumbersAreTheShortestTextThatReadsBack) {
    EXPECT_EQ(exact_number(0.1), "0.1");
    EXPECT_EQ(exact_number(2.0), "2");
    EXPECT_EQ(exact_number(1e-300), "1e-300");
    for (const double v :
         {1.0 / 3.0, 2.0 / 3.0, 6.02214076e23, -1.2345678901234567e-5, 0.30000000000000004})
        EXPECT_EQ(std::strtod(exact_number(v).c_str(), nullptr), v) << exact_number(v);
    EXPECT_EQ(exact_number(1.0 / 3.0), "0.3333333333333333");
    EXPECT_EQ(exact_number(std::nan("")), "");
    EXPECT_EQ(exact_number(std::numeric_limits<double>::infinity()), "");
}

TEST(TextFormat, FixedSignedAndSignificantNumbers) {
    EXPECT_EQ(fixed_number(3.14159, 2), "3.14");
    EXPECT_EQ(fixed_number(-0.5, 0), "-0");
    EXPECT_EQ(fixed_number(1e300, 2).size(), 304u);  // 301 digits, the point, 2 decimals
    EXPECT_EQ(signed_number(2.5, 2), "+2.50");
    EXPECT_EQ(signed_number(-2.5, 1), "-2.5");
    EXPECT_EQ(significant_number(0.000123456, 3), "0.000123");
    EXPECT_EQ(significant_number(std::nan(""), 3), "n/a");
}
