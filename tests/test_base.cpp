// Tests of base/: the strict number parser (parse.c), the JSON writer read
// back by the JSON reader (json.c), the CSV writer read back by an RFC 4180
// reader written here, and the CRC-32 table under many threads (binio.c).
#include <gtest/gtest.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mantis/binio.h"
#include "mantis/csv.h"
#include "mantis/json.h"
#include "mantis/parse.h"
#include "mantis/status.h"
#include "test_rng.h"

namespace {

TEST(Parse, IntTakesTheWholeStringOrNothing)
{
    long v = 77;
    EXPECT_EQ(mts_parse_int("5", 0, 10, &v), 0);
    EXPECT_EQ(v, 5);
    EXPECT_EQ(mts_parse_int("-3", -5, 10, &v), 0);
    EXPECT_EQ(v, -3);
    EXPECT_EQ(mts_parse_int("0", 0, 0, &v), 0);
    v = 77;
    // docs/reliability.md: no leading/trailing space, no '+', no trailing text, no overflow, the range checked
    for (const char *bad : {" 5", "5 ", "+5", "5x", "", "-", "--5", "0x10", "1e3", "5.0", "11", "-6",
                            "99999999999999999999999", "-99999999999999999999999", "\t5", "5\n"}) {
        EXPECT_EQ(mts_parse_int(bad, -5, 10, &v), -1) << "'" << bad << "'";
        EXPECT_EQ(v, 77) << "'" << bad << "' changed the output";
    }
    EXPECT_EQ(mts_parse_int(nullptr, 0, 1, &v), -1);
    EXPECT_EQ(mts_parse_int("9223372036854775807", 0, LONG_MAX, &v), 0);
    EXPECT_EQ(v, LONG_MAX);
}

TEST(Parse, U64DecimalOrHexOnly)
{
    uint64_t v = 0;
    EXPECT_EQ(mts_parse_u64("18446744073709551615", &v), 0);
    EXPECT_EQ(v, UINT64_MAX);
    EXPECT_EQ(mts_parse_u64("0x1F", &v), 0);
    EXPECT_EQ(v, 31u);
    EXPECT_EQ(mts_parse_u64("010", &v), 0);
    EXPECT_EQ(v, 10u) << "a leading zero is not octal";
    for (const char *bad : {"-1", " 1", "+1", "1 ", "18446744073709551616", "0x", "0x-1", "0x 1", "", "1x", "0b1"})
        EXPECT_EQ(mts_parse_u64(bad, &v), -1) << "'" << bad << "'";
}

TEST(Parse, DoubleAndHex32)
{
    double d = 0;
    EXPECT_EQ(mts_parse_double("0.05", 0, 1, &d), 0);
    EXPECT_EQ(d, 0.05);
    EXPECT_EQ(mts_parse_double("-1e-3", -1, 1, &d), 0);
    EXPECT_EQ(d, -1e-3);
    EXPECT_EQ(mts_parse_double(".5", 0, 1, &d), 0);
    for (const char *bad : {"+0.5", " 0.5", "0.5 ", "0.05abc", "nan", "inf", "-inf", "0x1p-2", "", ".", "-", "1e999",
                            "2", "-0.5e"})
        EXPECT_EQ(mts_parse_double(bad, -1, 1, &d), -1) << "'" << bad << "'";
    uint32_t h = 0;
    EXPECT_EQ(mts_parse_hex32("0x3F800000", &h), 0);
    EXPECT_EQ(h, 0x3f800000u);
    for (const char *bad : {"", "0x", "123456789", "3f80000g", " 3f", "-1"}) EXPECT_EQ(mts_parse_hex32(bad, &h), -1) << bad;
}

TEST(Parse, ListsNeverDropItems)
{
    long x[4];
    int bad = -1;
    EXPECT_EQ(mts_parse_int_list("512,1024", 0, 1, 8192, x, 4, &bad), 2);
    EXPECT_EQ(x[0], 512);
    EXPECT_EQ(x[1], 1024);
    EXPECT_EQ(mts_parse_int_list("1,2,3,4", 0, 1, 9, x, 4, &bad), 4);
    // a fifth item is an error of its own, never dropped
    EXPECT_EQ(mts_parse_int_list("1,2,3,4,5", 0, 1, 9, x, 4, &bad), -2);
    EXPECT_EQ(mts_parse_int_list("1,2,x", 0, 1, 9, x, 4, &bad), -1);
    EXPECT_EQ(bad, 2);
    for (const char *b : {"", ",", "1,", ",1", "1,,2", "1, 2", " 1", "+1", "1;2", "0", "10"})
        EXPECT_EQ(mts_parse_int_list(b, 0, 1, 9, x, 4, nullptr), -1) << "'" << b << "'";
    // configuration files: spaces around items
    EXPECT_EQ(mts_parse_int_list(" 1 , 2,\t3 ", MTS_LIST_SPACES, 0, 9, x, 4, &bad), 3);
    EXPECT_EQ(x[2], 3);
    for (const char *b : {"1 2", "1, ,2", "1,", " "}) EXPECT_EQ(mts_parse_int_list(b, MTS_LIST_SPACES, 0, 9, x, 4, nullptr), -1) << b;
}

// An RFC 4180 reader: rows of fields; quoted fields may hold commas, "", CR
// and LF. Returns false on text that is not CSV (a quote in an unquoted
// field, an unterminated quote, text after a closing quote).
bool read_csv(const std::string &t, std::vector<std::vector<std::string>> *rows)
{
    rows->clear();
    std::vector<std::string> row;
    std::string f;
    size_t i = 0, n = t.size();
    bool any = false;
    while (i < n) {
        if (t[i] == '"' && f.empty()) {
            for (i++;; i++) {
                if (i >= n) return false;
                if (t[i] == '"') {
                    if (i + 1 < n && t[i + 1] == '"') { f += '"'; i++; continue; }
                    i++;
                    break;
                }
                f += t[i];
            }
            if (i < n && t[i] != ',' && t[i] != '\n') return false;
            any = true;
            continue;
        }
        char c = t[i++];
        if (c == ',') { row.push_back(f); f.clear(); any = true; }
        else if (c == '\n') { row.push_back(f); rows->push_back(row); row.clear(); f.clear(); any = false; }
        else if (c == '"' || c == '\r') return false; /* a bare quote or CR: readers split rows on CR */
        else { f += c; any = true; }
    }
    if (any || !row.empty()) return false; /* every row ends with a newline */
    return true;
}

std::string capture(void (*fn)(FILE *, void *), void *ctx)
{
    char *buf = nullptr;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    fn(f, ctx);
    fclose(f);
    std::string s(buf, n);
    free(buf);
    return s;
}

// Random text with what breaks hand-written writers: quotes, backslashes,
// commas, CR/LF, tabs, control bytes, spaces at the ends, UTF-8.
std::string nasty(uint64_t *st)
{
    static const char *const bits[] = {"\"", "\\", ",", "\n", "\r", "\t", " ", "a", "Z", "0", "\x01", "\x1f",
                                       "\xc3\xa9", "{", "}", "[", "]", ":", "null", "\"\"", ";", "\\u0041"};
    std::string s;
    int len = (int)(splitmix64(st) % 12);
    for (int i = 0; i < len; i++) s += bits[splitmix64(st) % (sizeof bits / sizeof bits[0])];
    return s;
}

double any_double(uint64_t *st)
{
    switch (splitmix64(st) % 8) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 0.0;
    case 4: return -0.0;
    case 5: return 5e-324;
    default: {
        uint64_t b = splitmix64(st);
        double d;
        memcpy(&d, &b, sizeof d);
        return d;  // any bit pattern, NaNs and infinities included
    }
    }
}

struct Doc {
    std::vector<std::string> keys, strs;
    std::vector<double> nums;
    std::vector<long long> ints;
    int lines;
};

void write_doc(FILE *f, void *ctx)
{
    const Doc *d = (const Doc *)ctx;
    mts_jw w;
    mts_jw_init(&w, f);
    mts_jw_obj(&w, nullptr, d->lines);
    for (size_t i = 0; i < d->strs.size(); i++) mts_jw_str(&w, d->keys[i].c_str(), d->strs[i].c_str());
    mts_jw_arr(&w, "nums", !d->lines);
    for (double v : d->nums) mts_jw_num(&w, nullptr, v, nullptr);
    mts_jw_end(&w);
    mts_jw_arr(&w, "ints", 0);
    for (long long v : d->ints) mts_jw_int(&w, nullptr, v);
    mts_jw_end(&w);
    mts_jw_obj(&w, "empty", d->lines);
    mts_jw_end(&w);
    mts_jw_null(&w, "nothing");
    mts_jw_bool(&w, "yes", 1);
    mts_jw_str(&w, "null_string", nullptr);
    mts_jw_end(&w);
    EXPECT_EQ(w.bad, 0);
}

// Whatever the strings and numbers, the writer's JSON parses back to them:
// every string byte for byte, every finite number bit for bit, NaN and
// infinities as null.
TEST(Json, WriterRoundTripsThroughTheReader)
{
    uint64_t st = 30;
    for (int round = 0; round < 2000; round++) {
        Doc d;
        d.lines = round & 1;
        int n = (int)(splitmix64(&st) % 6);
        for (int i = 0; i < n; i++) {
            d.keys.push_back(nasty(&st) + "#" + std::to_string(i));  // distinct keys
            d.strs.push_back(nasty(&st));
        }
        for (int i = 0; i < 5; i++) d.nums.push_back(any_double(&st));
        d.ints = {0, -1, LLONG_MIN, LLONG_MAX, (long long)splitmix64(&st)};
        std::string text = capture(write_doc, &d);
        ASSERT_FALSE(text.empty());
        ASSERT_EQ(text.back(), '\n');
        size_t at = 0;
        mts_json *j = mts_json_parse(text.c_str(), &at);
        ASSERT_NE(j, nullptr) << "round " << round << ": does not parse at byte " << at << ":\n" << text;
        for (size_t i = 0; i < d.strs.size(); i++) {
            const mts_json *v = mts_json_get(j, d.keys[i].c_str());
            ASSERT_NE(v, nullptr) << d.keys[i];
            ASSERT_EQ(v->type, MTS_JSTR);
            EXPECT_EQ(std::string(v->str), d.strs[i]) << text;
        }
        const mts_json *a = mts_json_get(j, "nums");
        ASSERT_TRUE(a && a->type == MTS_JARR);
        const mts_json *e = a->child;
        for (double v : d.nums) {
            ASSERT_NE(e, nullptr);
            if (std::isfinite(v)) {
                ASSERT_EQ(e->type, MTS_JNUM) << text;
                EXPECT_EQ(memcmp(&e->num, &v, sizeof v), 0) << v << " read back as " << e->num;
            } else {
                EXPECT_EQ(e->type, MTS_JNULL) << v << ": " << text;
            }
            e = e->next;
        }
        const mts_json *ints = mts_json_get(j, "ints");
        ASSERT_TRUE(ints && ints->child);
        EXPECT_EQ(ints->child->next->num, -1);
        EXPECT_EQ(mts_json_get(j, "nothing")->type, MTS_JNULL);
        EXPECT_EQ(mts_json_get(j, "null_string")->type, MTS_JNULL);
        EXPECT_EQ(mts_json_get(j, "empty")->type, MTS_JOBJ);
        EXPECT_EQ(mts_json_num(j, "yes", 0), 1);
        mts_json_free(j);
    }
}

TEST(Json, WriterLayoutAndMisuse)
{
    struct L {
        static void pretty(FILE *f, void *) {
            mts_jw w;
            mts_jw_init(&w, f);
            mts_jw_obj(&w, nullptr, 1);
            mts_jw_str(&w, "a", "x");
            mts_jw_arr(&w, "b", 1);
            mts_jw_obj(&w, nullptr, 0);
            mts_jw_num(&w, "c", 1.5, "%.2f");
            mts_jw_num(&w, "d", NAN, "%.2f");
            mts_jw_end(&w);
            mts_jw_end(&w);
            mts_jw_end(&w);
        }
        static void misuse(FILE *f, void *) {
            mts_jw w;
            mts_jw_init(&w, f);
            mts_jw_arr(&w, nullptr, 0);
            mts_jw_int(&w, "key in an array", 1);
            EXPECT_EQ(w.bad, 1);
            mts_jw_end(&w);
        }
    };
    EXPECT_EQ(capture(L::pretty, nullptr), "{\n  \"a\": \"x\",\n  \"b\": [\n    {\"c\": 1.50, \"d\": null}\n  ]\n}\n");
    EXPECT_EQ(capture(L::misuse, nullptr), "[");
}

struct Table {
    std::vector<std::vector<std::string>> text;
    std::vector<double> nums;
};

void write_table(FILE *f, void *ctx)
{
    const Table *t = (const Table *)ctx;
    mts_csvw w;
    mts_csv_init(&w, f);
    for (const auto &r : t->text) {
        for (const auto &s : r) mts_csv_str(&w, s.c_str());
        mts_csv_end(&w);
    }
    for (double v : t->nums) mts_csv_num(&w, v, nullptr);
    mts_csv_end(&w);
}

// Whatever the fields, the writer's CSV reads back (RFC 4180) to the same
// rows and fields; a number reads back bit for bit, NaN and inf as "".
TEST(Csv, WriterRoundTripsThroughAnRfc4180Reader)
{
    uint64_t st = 31;
    for (int round = 0; round < 2000; round++) {
        Table t;
        int rows = 1 + (int)(splitmix64(&st) % 4), cols = 1 + (int)(splitmix64(&st) % 5);
        for (int r = 0; r < rows; r++) {
            t.text.emplace_back();
            for (int c = 0; c < cols; c++) t.text.back().push_back(nasty(&st));
        }
        for (int i = 0; i < 4; i++) t.nums.push_back(any_double(&st));
        std::string text = capture(write_table, &t);
        std::vector<std::vector<std::string>> got;
        ASSERT_TRUE(read_csv(text, &got)) << text;
        ASSERT_EQ(got.size(), (size_t)rows + 1) << text;
        for (int r = 0; r < rows; r++) EXPECT_EQ(got[r], t.text[r]) << text;
        ASSERT_EQ(got[rows].size(), t.nums.size());
        for (size_t i = 0; i < t.nums.size(); i++) {
            if (!std::isfinite(t.nums[i])) {
                EXPECT_EQ(got[rows][i], "");
                continue;
            }
            double back = strtod(got[rows][i].c_str(), nullptr);
            EXPECT_EQ(memcmp(&back, &t.nums[i], sizeof back), 0) << got[rows][i];
        }
    }
    // the cases by name: a design name with a comma or a quote stays one field
    Table named{{{"my,design", "say \"hi\"", " pad ", "plain"}}, {}};
    EXPECT_EQ(capture(write_table, &named), "\"my,design\",\"say \"\"hi\"\"\",\" pad \",plain\n\n");
}

// The exit status of every status code (docs/reliability.md's table), which
// statuses the flow takes as the environment's, and the one table of tool
// phrases.
TEST(Status, ExitClassesAndToolPhrases)
{
    EXPECT_EQ(mts_status_exit(MTS_OK), MTS_EXIT_OK);
    EXPECT_EQ(mts_status_exit(MTS_EMISMATCH), MTS_EXIT_MISMATCH);
    for (int c : {MTS_EINVAL, MTS_EFORMAT, MTS_EUNSUPPORTED, MTS_ENOTLUT, MTS_ETOOL})
        EXPECT_EQ(mts_status_exit(c), MTS_EXIT_INPUT) << mts_status_name(c);
    for (int c : {MTS_EIO, MTS_ENOMEM, MTS_ENOSPC, MTS_ENOTOOL})
        EXPECT_EQ(mts_status_exit(c), MTS_EXIT_ENV) << mts_status_name(c);
    EXPECT_STREQ(mts_status_name(MTS_ENOSPC), "MTS_ENOSPC");
    EXPECT_STREQ(mts_status_name(MTS_ENOTOOL), "MTS_ENOTOOL");
    for (int st : {(int)MTS_EXIT_ENV, (int)MTS_EXIT_NOSTART, MTS_EXIT_SIGNAL + 9, -1}) EXPECT_TRUE(mts_exit_is_env(st)) << st;
    for (int st : {MTS_EXIT_OK, MTS_EXIT_MISMATCH, MTS_EXIT_INPUT, MTS_EXIT_DIVERGED}) EXPECT_FALSE(mts_exit_is_env(st)) << st;
    EXPECT_EQ(mts_status_of_errno(ENOSPC), MTS_ENOSPC);
    EXPECT_EQ(mts_status_of_errno(EDQUOT), MTS_ENOSPC);
    EXPECT_EQ(mts_status_of_errno(ENOMEM), MTS_ENOMEM);
    EXPECT_EQ(mts_status_of_errno(EACCES), MTS_EIO);
    EXPECT_EQ(mts_status_of_text("/usr/bin/ld: final link failed: No space left on device"), MTS_ENOSPC);
    EXPECT_EQ(mts_status_of_text("cc1plus: out of memory allocating 65536 bytes"), MTS_ENOMEM);
    EXPECT_EQ(mts_status_of_text("write error: Disk quota exceeded"), MTS_ENOSPC);
    EXPECT_EQ(mts_status_of_text("%Error: x.v:3:1: syntax error, unexpected endmodule"), 0);
    EXPECT_EQ(mts_status_of_text(nullptr), 0);
    int n = 0;
    for (int i = 0; mts_env_phrases[i]; i++, n++) EXPECT_NE(mts_status_of_text(mts_env_phrases[i]), 0) << i;
    EXPECT_EQ(n, 9);
}

// The CRC-32 bit by bit (the readable reference of the table-driven one).
uint32_t crc_ref(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
}

// The table is a compile-time constant (no lazy initialisation to race on):
// the check value of CRC-32/ISO-HDLC, chaining, and 8 threads checksumming
// at once from a cold start, each result equal to the bitwise reference.
TEST(Crc32, KnownValuesAndManyThreadsAgree)
{
    EXPECT_EQ(mts_crc32(0, "123456789", 9), 0xCBF43926u);
    EXPECT_EQ(mts_crc32(0, "", 0), 0u);
    EXPECT_EQ(mts_crc32(mts_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    std::vector<uint8_t> buf(1 << 16);
    uint64_t st = 32;
    for (auto &b : buf) b = (uint8_t)splitmix64(&st);
    const int nthreads = 8;
    std::vector<int> bad(nthreads, 0);
    std::vector<std::thread> t;
    for (int i = 0; i < nthreads; i++)
        t.emplace_back([&, i] {
            for (size_t len = (size_t)i; len < buf.size(); len = len * 3 + 17)
                bad[i] += mts_crc32(0, buf.data(), len) != crc_ref(buf.data(), len);
        });
    for (auto &x : t) x.join();
    for (int i = 0; i < nthreads; i++) EXPECT_EQ(bad[i], 0) << "thread " << i;
}

}  // namespace
