
/*
 * Unit tests for ngx_pty_text.c; prints TAP, exits non-zero on failure.
 *
 *   cc -O2 -Wall -Wextra -Werror -Isrc -o text_test \
 *       t/unit/text_test.c src/ngx_pty_text.c
 *
 * The readline cases are byte strings captured from bash 5 and Python
 * 3.11 (GNU readline) and Python 3.13 (pyrepl) driven through a real PTY.
 */


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ngx_pty_text.h"


typedef struct {
    const char  *desc;
    const char  *in;
    size_t       in_len;
    const char  *out;
    size_t       out_len;
} ngx_pty_text_case_t;


#define T(d, i, o)  { d, i, sizeof(i) - 1, o, sizeof(o) - 1 }

#define PY313_PROMPT                                                        \
    "\x1b[?2004h\x1b[?1h\x1b=\x1b[?25l\x1b[1A\n\x1b[1;35m>>> \x1b[0m"       \
    "\x1b[4D\x1b[?12l\x1b[?25h\x1b[4C"

#define PY313_KEY(p, n, s)                                                 \
    "\x1b[?25l\x1b[" #p "D\x1b[1;35m>>> \x1b[0m" s "\x1b[" #n "D"           \
    "\x1b[?12l\x1b[?25h\x1b[" #n "C"


static ngx_pty_text_case_t  cases[] = {

    /* plain text, lines */

    T("plain text", "hello", "hello"),
    T("empty input", "", ""),
    T("CRLF lines", "a\r\nb\r\n", "a\nb\n"),
    T("bare LF is newline + CR", "ab\ncd", "ab\ncd"),
    T("bare LF resets column", "abc\nX", "abc\nX"),
    T("empty lines kept", "a\r\n\r\n\r\nb", "a\n\n\nb"),
    T("VT and FF are newlines", "a\vb\fc", "a\nb\nc"),
    T("completed line trailing spaces trimmed", "ab   \r\n", "ab\n"),
    T("current line keeps trailing spaces", ">>> ", ">>> "),
    T("only spaces line completes empty", "   \r\n", "\n"),

    /* CR, BS, TAB, other controls */

    T("CR overwrites", "abc\rX", "Xbc"),
    T("CR then longer text", "ab\rwxyz", "wxyz"),
    T("BS moves left", "ab\bX", "aX"),
    T("BS stops at column 0", "\b\b\bab", "ab"),
    T("BS does not erase", "abc\b\b", "abc"),
    T("TAB to next stop", "a\tb", "a       b"),
    T("TAB at a stop", "12345678\tx", "12345678        x"),
    T("TAB past end leaves spaces", "ab\t", "ab      "),
    T("TAB inside line only moves", "abcdefghij\r\tX", "abcdefghXj"),
    T("TAB trailing spaces trimmed when done", "ab\t\r\n", "ab\n"),
    T("BEL NUL SO SI DEL dropped", "a\x07" "b\0c\x0e\x0f" "d\x7f" "e",
      "abcde"),
    T("C1 control as UTF-8 dropped", "a\xc2\x9b" "b", "ab"),

    /* CSI */

    T("SGR stripped", "\x1b[1;31mred\x1b[0m \x1b[38:2:1:2:3mx\x1b[m",
      "red x"),
    T("CUB", "abc\x1b[2DX", "aXc"),
    T("CUB default 1", "abc\x1b[DX", "abX"),
    T("CUB stops at 0", "abc\x1b[99DX", "Xbc"),
    T("CUF within line", "abc\r\x1b[2CX", "abX"),
    T("CUF past end then text", "a\x1b[3Cb", "a   b"),
    T("CUF past end no text", "a\x1b[3C", "a"),
    T("CUF 0 means 1", "abc\r\x1b[0CX", "aXc"),
    T("CHA", "abcdef\x1b[3GX", "abXdef"),
    T("CHA default", "abc\x1b[GX", "Xbc"),
    T("HPA and HPR", "abcdef\x1b[2`X\x1b[2aY", "aXcdYf"),
    T("EL 0", "abcdef\x1b[3D\x1b[K", "abc"),
    T("EL 0 explicit", "abcdef\x1b[3D\x1b[0K", "abc"),
    T("EL 1", "abcdef\x1b[3D\x1b[1K", "    ef"),
    T("EL 1 at end clears all", "abcdef\x1b[1KX", "      X"),
    T("EL 2", "abc\x1b[2Kxy", "   xy"),
    T("ED 0 clears to end of line", "abc\x1b[D\x1b[J", "ab"),
    T("ED 2 clears the line", "abc\x1b[2J", ""),
    T("ECH", "abcdef\r\x1b[2X", "  cdef"),
    T("ECH past end", "abcdef\x1b[3D\x1b[9X", "abc"),
    T("DCH", "abcdef\r\x1b[1C\x1b[2P", "adef"),
    T("DCH default 1", "abcdef\r\x1b[P", "bcdef"),
    T("DCH past end", "abcdef\r\x1b[2C\x1b[99P", "ab"),
    T("ICH", "abcdef\r\x1b[1C\x1b[2@XY", "aXYbcdef"),
    T("ICH default 1", "abc\r\x1b[@X", "Xabc"),
    T("ICH past end is a no-op", "abc\x1b[5@X", "abcX"),
    T("CHT and CBT", "a\x1b[2Ix\x1b[2Zy", "a       y       x"),
    T("DEC private modes ignored", "\x1b[?2004habc\x1b[?2004l\x1b[?25l",
      "abc"),
    T("private CUB ignored", "abc\x1b[?2DX", "abcX"),
    T("CSI with intermediate ignored", "\x1b[2 qab\x1b[!pc", "abc"),
    T("CSI > c ignored", "\x1b[>0cab", "ab"),
    T("unknown CSI final ignored", "ab\x1b[5nc\x1b[3~d", "abcd"),
    T("CSI many params", "\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18m"
      "ok", "ok"),
    T("CSI huge param saturates", "ab\x1b[99999999999999999999DX", "Xb"),
    T("CAN aborts CSI", "\x1b[12\x18" "ab", "ab"),
    T("SUB aborts CSI", "\x1b[12\x1a" "ab", "ab"),
    T("BS inside CSI acts", "abc\x1b[\bK", "ab"),
    T("ESC restarts CSI", "ab\x1b[3\x1b[DX", "aX"),
    T("CSI aborted by UTF-8 byte", "a\x1b[\xc3\xa9", "a\xc3\xa9"),

    /* OSC, DCS, APC, PM, SOS, two-byte ESC */

    T("OSC ended by BEL", "\x1b]0;title\x07hello", "hello"),
    T("OSC ended by ST", "\x1b]0;title\x1b\\hello", "hello"),
    T("OSC 8 hyperlink", "\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\", "link"),
    T("OSC with UTF-8 body", "\x1b]2;caf\xc3\xa9\x07ok", "ok"),
    T("OSC broken by ESC [", "\x1b]0;t\x1b[1mX", "X"),
    T("OSC aborted by CAN", "\x1b]0;t\x18X", "X"),
    T("DCS to ST", "\x1bPq#0;2;0;0;0\x07x\x1b\\ok", "ok"),
    T("APC PM SOS", "\x1b_Gabc\x1b\\a\x1b^pm\x1b\\b\x1bXsos\x1b\\c", "abc"),
    T("two-byte ESC", "\x1b=\x1b>\x1b" "7\x1b" "8ab\x1b(B\x1b)0c\x1b#8", "abc"),
    T("ESC ESC", "a\x1b\x1b[1mb", "ab"),
    T("RIS", "abc\x1b" "cd", "abc\nd"),
    T("IND and NEL", "a\x1b" "Db\x1b" "Ec", "a\nb\nc"),

    /* UTF-8 */

    T("UTF-8 kept", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
      "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
    T("wide CJK takes 2 columns",
      "\xe4\xb8\xad\xe6\x96\x87\b\bX", "\xe4\xb8\xadX"),
    T("BS BS over wide char", "\xe4\xb8\xad\b\bX", "X"),
    T("overwrite right half of wide", "\xe4\xb8\xad\bX", " X"),
    T("overwrite left half of wide", "a\xe4\xb8\xad\r\x1b[CX", "aX"),
    T("narrow onto wide then text", "\xe4\xb8\xad\xe6\x96\x87\r\x1b[1CXY",
      " XY"),
    T("wide onto wide straddle", "ab\xe4\xb8\xad\r\x1b[3C\xe6\x96\x87",
      "ab \xe6\x96\x87"),
    T("emoji is wide", "\xf0\x9f\x98\x80\b\bX", "X"),
    T("EL 0 from right half of wide", "a\xe4\xb8\xad\b\x1b[K", "a"),
    T("DCH from right half of wide", "a\xe4\xb8\xad" "b\b\b\x1b[P", "a b"),
    T("ICH splits wide", "a\xe4\xb8\xad" "b\b\b\x1b[@", "a   b"),
    T("combining mark kept", "e\xcc\x81!", "e\xcc\x81!"),
    T("two combining marks", "e\xcc\xa3\xcc\x82", "e\xcc\xa3\xcc\x82"),
    T("third combining mark dropped", "e\xcc\xa3\xcc\x82\xcc\x81",
      "e\xcc\xa3\xcc\x82"),
    T("combining mark at column 0 dropped", "\r\xcc\x81" "a", "a"),
    T("combining mark on wide char", "\xe4\xb8\xad\xcc\x81",
      "\xe4\xb8\xad\xcc\x81"),
    T("overwritten cell loses mark", "e\xcc\x81\bx", "x"),
    T("emoji with VS16", "\xe2\x9d\xa4\xef\xb8\x8f!",
      "\xe2\x9d\xa4\xef\xb8\x8f!"),
    T("invalid byte", "ab \xe4" "c", "ab \xef\xbf\xbd" "c"),
    T("lone continuation", "a\x80" "b", "a\xef\xbf\xbd" "b"),
    T("overlong 2-byte", "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"),
    T("overlong 3-byte", "\xe0\x80\xaf", "\xef\xbf\xbd"),
    T("surrogate encoded", "\xed\xa0\x80", "\xef\xbf\xbd"),
    T("above U+10FFFF", "\xf4\x90\x80\x80", "\xef\xbf\xbd"),
    T("F5..FF", "\xf5\xff", "\xef\xbf\xbd\xef\xbf\xbd"),
    T("truncated then ASCII", "\xf0\x9f\x98" "a", "\xef\xbf\xbd" "a"),
    T("truncated by ESC", "\xe4\x1b[mX", "\xef\xbf\xbdX"),
    T("truncated by CR", "ab\xe4\rX", "Xb\xef\xbf\xbd"),
    T("incomplete at end held back", "a\xe4\xb8", "a"),

    /* readline: bash 5.2, PS1='$ ', captured */

    T("bash: helo, 2x DEL, lo",
      "$ echo helo\b\x1b[K\b\x1b[Klo\r\n\x1b[?2004l\rhelo\r\n\x1b[?2004h$ ",
      "$ echo helo\nhelo\n$ "),
    T("bash: C-b C-b X",
      "$ echo abc\b\bXbc\b\b\r\n\x1b[?2004l\raXbc\r\n\x1b[?2004h$ ",
      "$ echo aXbc\naXbc\n$ "),
    T("bash: C-a then insert",
      "$ echo hi\r\x1b[C\x1b[C\x1b[1@#\x1b[1@ \r\n\x1b[?2004l\r"
      "\x1b[?2004h$ ",
      "$ # echo hi\n$ "),
    T("bash: history replaces longer line",
      "$ echo longer text\r\x1b[C\x1b[C\x1b[C\x1b[C\x1b[C\x1b[C\x1b[C"
      "a\x1b[K\x07\r\n\x1b[?2004l\ra\r\n\x1b[?2004h$ ",
      "$ echo a\na\n$ "),
    T("bash: C-u",
      "$ echo abcdef\r\x1b[C\x1b[C\x1b[Kecho x\r\n\x1b[?2004l\rx\r\n"
      "\x1b[?2004h$ ",
      "$ echo x\nx\n$ "),
    T("bash: C-w",
      "$ echo one two\b\b\b\x1b[Kthree\r\n\x1b[?2004l\rone three\r\n"
      "\x1b[?2004h$ ",
      "$ echo one three\none three\n$ "),
    T("bash: completion, DELs, wide char DEL",
      "$ echo \b\x1b[K\b\x1b[K\b\x1b[K\b\x1b[K\b\x1b[K\x07"
      "echo \xc3\xa9\xe4\xb8\xad\b\b\x1b[K\b\x1b[Kz\r\n\x1b[?2004l\r"
      "z\r\n\x1b[?2004h$ ",
      "$ echo z\nz\n$ "),

    /* readline: python 3.11, captured */

    T("python 3.11: 2**64",
      ">>> 2**64\r\n18446744073709551616\r\n>>> ",
      ">>> 2**64\n18446744073709551616\n>>> "),
    T("python 3.11: helo, 2x DEL, lo",
      ">>> helo\b\x1b[K\b\x1b[Klo\r\nTraceback (most recent call last):\r\n"
      "  File \"<stdin>\", line 1, in <module>\r\n"
      "NameError: name 'helo' is not defined. Did you mean: 'help'?\r\n>>> ",
      ">>> helo\nTraceback (most recent call last):\n"
      "  File \"<stdin>\", line 1, in <module>\n"
      "NameError: name 'helo' is not defined. Did you mean: 'help'?\n>>> "),
    T("python 3.11: left arrows and insert",
      ">>> abc\b\bXbc\b\b\r\nNameError\r\n>>> ",
      ">>> aXbc\nNameError\n>>> "),

    /* pyrepl: python 3.13, captured */

    T("python 3.13: startup prompt", PY313_PROMPT, ">>> "),
    T("python 3.13: 2**64",
      PY313_PROMPT
      PY313_KEY(4, 5, "2") PY313_KEY(5, 6, "2*") PY313_KEY(6, 7, "2**")
      PY313_KEY(7, 8, "2**6") PY313_KEY(8, 9, "2**64")
      "\x1b[9D\n\r\x1b[?2004l\x1b[?1l\x1b>18446744073709551616\r\n"
      PY313_PROMPT,
      ">>> 2**64\n18446744073709551616\n>>> "),
    T("python 3.13: helo, 2x DEL, lo",
      PY313_PROMPT
      PY313_KEY(4, 5, "h") PY313_KEY(5, 6, "he") PY313_KEY(6, 7, "hel")
      PY313_KEY(7, 8, "helo")
      "\x1b[?25l\x1b[8D\x1b[K\x1b[1;35m>>> \x1b[0mhel\x1b[7D\x1b[?12l"
      "\x1b[?25h\x1b[7C"
      "\x1b[?25l\x1b[7D\x1b[K\x1b[1;35m>>> \x1b[0mhe\x1b[6D\x1b[?12l"
      "\x1b[?25h\x1b[6C"
      PY313_KEY(6, 7, "hel") PY313_KEY(7, 8, "helo")
      "\x1b[8D\n\r\x1b[?2004l\x1b[?1l\x1b>Traceback (most recent call last):"
      "\r\n  File \x1b[35m\"<python-input-2>\"\x1b[0m, line \x1b[35m1\x1b[0m,"
      " in \x1b[35m<module>\x1b[0m\r\n    helo\r\n\x1b[1;35mNameError\x1b[0m: "
      "\x1b[35mname 'helo' is not defined. Did you mean: 'help'?\x1b[0m\r\n"
      PY313_PROMPT,
      ">>> helo\nTraceback (most recent call last):\n"
      "  File \"<python-input-2>\", line 1, in <module>\n    helo\n"
      "NameError: name 'helo' is not defined. Did you mean: 'help'?\n>>> "),

    /* cat in canonical mode: the tty driver's own echo, captured */

    T("tty echoe: BS SP BS",
      "helo\b \b\b \blo\r\nhelo\r\n", "helo\nhelo\n"),
    T("tty echoe over a wide char, invalid UTF-8 back",
      "ab \xe4\xb8\xad\b \b\b \b" "c\r\nab \xe4" "c\r\n",
      "ab c\nab \xef\xbf\xbd" "c\n"),

    /* the redraw variants from the brief: all settle to ">>> hello" */

    T("redraw: BS EL", ">>> helo\b\x1b[Klo", ">>> hello"),
    T("redraw: BS SP BS", ">>> helo\b \blo", ">>> hello"),
    T("redraw: BS DCH", ">>> helo\b\x1b[1Plo", ">>> hello"),
    T("redraw: CR EL full", ">>> helo\r\x1b[K>>> hello", ">>> hello"),
    T("redraw: CR full EL", ">>> hello world\r>>> hello\x1b[K", ">>> hello"),
    T("redraw: CHA EL", ">>> helo\x1b[8G\x1b[Klo", ">>> hello"),

    /* rows: cursor up/down, absolute positioning */

    T("CUU then LF adds no empty line", "out\r\n\x1b[1A\n>>> ", "out\n>>> "),
    T("CUU on a non-empty line completes it", "abc\x1b[Adef\n",
      "abc\n   def\n"),
    T("multi-line progress rewrite",
      "l1: 0%\r\nl2: 0%\r\n\x1b[2A\r\x1b[Kl1: 50%\n\x1b[Kl2: 30%\n",
      "l1: 0%\nl2: 0%\nl1: 50%\nl2: 30%\n"),
    T("CUD back down", "a\r\n\x1b[A\x1b[Bb", "a\nb"),
    T("RI then LF", "a\r\n\x1bM\nb", "a\nb"),
    T("CUP rows become lines",
      "\x1b[H\x1b[2Jtop line\x1b[2;1Hsecond\x1b[3;5Hx",
      "top line\nsecond\n    x"),
    T("CPL and CNL", "a\r\n\x1b[Fb\x1b[Ec", "a\nb\nc"),
    T("VPA", "ab\x1b[5dX", "ab\n  X"),
};


static int  failed;
static int  test_no;


static void
dump(const char *label, const u_char *p, size_t n)
{
    size_t  i;

    printf("# %s: \"", label);

    for (i = 0; i < n && i < 400; i++) {
        if (p[i] == '\\' || p[i] == '"') {
            printf("\\%c", p[i]);

        } else if (p[i] == '\n') {
            printf("\\n");

        } else if (p[i] >= 0x20 && p[i] < 0x7f) {
            putchar(p[i]);

        } else {
            printf("\\x%02x", p[i]);
        }
    }

    printf("%s\" (%zu bytes)\n", n > 400 ? "..." : "", n);
}


static int
check(const char *desc, const u_char *got, size_t got_len,
    const u_char *exp, size_t exp_len)
{
    test_no++;

    if (got_len == exp_len && memcmp(got, exp, got_len) == 0) {
        printf("ok %d - %s\n", test_no, desc);
        return 1;
    }

    failed++;
    printf("not ok %d - %s\n", test_no, desc);
    dump("got", got, got_len);
    dump("expected", exp, exp_len);

    return 0;
}


static int
ok(int cond, const char *desc)
{
    test_no++;

    if (cond) {
        printf("ok %d - %s\n", test_no, desc);
        return 1;
    }

    failed++;
    printf("not ok %d - %s\n", test_no, desc);

    return 0;
}


static ngx_pty_text_t *
create(void)
{
    ngx_pty_text_t  *t;

    t = ngx_pty_text_create(0);
    if (t == NULL) {
        printf("Bail out! out of memory\n");
        exit(2);
    }

    return t;
}


static void
feed(ngx_pty_text_t *t, const void *p, size_t n)
{
    if (ngx_pty_text_feed(t, p, n) != 0) {
        printf("Bail out! feed failed\n");
        exit(2);
    }
}


static void
view(ngx_pty_text_t *t, ngx_pty_text_view_t *v, int take)
{
    if ((take ? ngx_pty_text_take(t, v) : ngx_pty_text_peek(t, v)) != 0) {
        printf("Bail out! take failed\n");
        exit(2);
    }
}


/* take everything as one string (malloc'ed) */

static u_char *
take_all(ngx_pty_text_t *t, size_t *len)
{
    u_char               *p;
    ngx_pty_text_view_t   v;

    view(t, &v, 1);

    p = malloc(v.len + 1);
    if (p == NULL) {
        printf("Bail out! out of memory\n");
        exit(2);
    }

    memcpy(p, v.data, v.len);
    *len = v.len;

    return p;
}


static u_char *
settle_split(const char *in, size_t len, size_t at, size_t *out_len)
{
    u_char          *r;
    ngx_pty_text_t  *t;

    t = create();
    feed(t, in, at);
    feed(t, in + at, len - at);
    r = take_all(t, out_len);
    ngx_pty_text_destroy(t);

    return r;
}


static u_char *
settle_bytes(const char *in, size_t len, size_t *out_len)
{
    size_t           i;
    u_char          *r;
    ngx_pty_text_t  *t;

    t = create();

    for (i = 0; i < len; i++) {
        feed(t, in + i, 1);
    }

    r = take_all(t, out_len);
    ngx_pty_text_destroy(t);

    return r;
}


static void
run_case(ngx_pty_text_case_t *c)
{
    size_t   at, n, bad;
    u_char  *r;
    char     desc[256];

    r = settle_split(c->in, c->in_len, c->in_len, &n);
    check(c->desc, r, n, (u_char *) c->out, c->out_len);
    free(r);

    bad = 0;

    for (at = 0; at <= c->in_len; at++) {
        r = settle_split(c->in, c->in_len, at, &n);

        if (n != c->out_len || memcmp(r, c->out, n) != 0) {
            if (bad++ == 0) {
                printf("# split at %zu:\n", at);
                dump("got", r, n);
            }
        }

        free(r);
    }

    snprintf(desc, sizeof(desc), "%s: split at every position", c->desc);
    ok(bad == 0, desc);

    r = settle_bytes(c->in, c->in_len, &n);
    snprintf(desc, sizeof(desc), "%s: byte by byte", c->desc);
    check(desc, r, n, (u_char *) c->out, c->out_len);
    free(r);
}


/* a sequence of feeds, each followed by take (or peek) and its result */

typedef struct {
    const char  *feed;
    const char  *expect;
    int          peek;
} ngx_pty_text_step_t;


static void
run_steps(const char *name, ngx_pty_text_step_t *steps)
{
    int                   i;
    char                  desc[256];
    ngx_pty_text_t       *t;
    ngx_pty_text_view_t   v;

    t = create();

    for (i = 0; steps[i].feed; i++) {
        feed(t, steps[i].feed, strlen(steps[i].feed));
        view(t, &v, !steps[i].peek);

        snprintf(desc, sizeof(desc), "%s: step %d %s", name, i + 1,
                 steps[i].peek ? "peek" : "take");
        check(desc, v.data, v.len, (u_char *) steps[i].expect,
              strlen(steps[i].expect));
    }

    ngx_pty_text_destroy(t);
}


static ngx_pty_text_step_t  repl[] = {
    { ">>> ", ">>> ", 0 },
    { "2**64\r\n18446744073709551616\r\n>>> ",
      "2**64\n18446744073709551616\n>>> ", 0 },
    { "print(1)\r\n1\r\n>>> ", "print(1)\n1\n>>> ", 0 },
    { "", "", 0 },
    { "\r\n>>> ", "\n>>> ", 0 },
    { NULL, NULL, 0 }
};

static ngx_pty_text_step_t  echo_first[] = {
    { ">>> ", ">>> ", 0 },
    { "pri", "pri", 1 },
    { "nt(1)", "print(1)", 1 },
    { "", "print(1)", 0 },
    { "\r\n1\r\n>>> ", "\n1\n>>> ", 0 },
    { NULL, NULL, 0 }
};

static ngx_pty_text_step_t  rewrite[] = {
    { "  0%", "  0%", 0 },
    { "\r 45%", "\n 45%", 0 },
    { "\r 46%\r 47%", "\n 47%", 0 },
    { "\r100%\r\n", "\n100%\n", 0 },
    { "$ ", "$ ", 0 },
    { NULL, NULL, 0 }
};

static ngx_pty_text_step_t  cleared[] = {
    { "Password: ", "Password: ", 0 },
    { "\r\x1b[K", "", 0 },
    { "Done\r\n", "\nDone\n", 0 },
    { NULL, NULL, 0 }
};

static ngx_pty_text_step_t  restored[] = {
    { "abc", "abc", 0 },
    { "\bX\bc", "", 0 },
    { "\b\x1b[K", "\nab", 0 },
    { "c\r\n", "c\n", 0 },
    { NULL, NULL, 0 }
};

static ngx_pty_text_step_t  cleared_then_lf[] = {
    { "abc", "abc", 0 },
    { "\r\x1b[K\r\n", "\n\n", 0 },
    { NULL, NULL, 0 }
};

static ngx_pty_text_step_t  bash_session[] = {
    { "\x1b[?2004h$ ", "$ ", 0 },
    { "echo helo\b\x1b[K\b\x1b[Klo", "echo helo", 0 },
    { "\r\n\x1b[?2004l\rhelo\r\n\x1b[?2004h$ ", "\nhelo\n$ ", 0 },
    { "echo hi\r\x1b[C\x1b[C\x1b[1@#\x1b[1@ ", "# echo hi", 0 },
    { "\r\n\x1b[?2004l\r\x1b[?2004h$ ", "\n$ ", 0 },
    { NULL, NULL, 0 }
};

static ngx_pty_text_step_t  py313_session[] = {
    { PY313_PROMPT, ">>> ", 0 },
    { PY313_KEY(4, 5, "2") PY313_KEY(5, 6, "2*"), "2*", 0 },
    { PY313_KEY(6, 7, "2**") PY313_KEY(7, 8, "2**6")
      PY313_KEY(8, 9, "2**64")
      "\x1b[9D\n\r\x1b[?2004l\x1b[?1l\x1b>18446744073709551616\r\n"
      PY313_PROMPT,
      "*64\n18446744073709551616\n>>> ", 0 },
    { NULL, NULL, 0 }
};


static void
test_peek(void)
{
    ngx_pty_text_t       *t;
    ngx_pty_text_view_t   v, w;

    t = create();
    feed(t, "line1\r\npart", 11);

    view(t, &v, 0);
    check("peek: completed + current", v.data, v.len,
          (u_char *) "line1\npart", 10);
    ok(v.stable == 6, "peek: stable covers completed lines only");

    view(t, &w, 0);
    check("peek: twice gives the same", w.data, w.len,
          (u_char *) "line1\npart", 10);

    feed(t, "\rPART2\r\nx", 9);
    view(t, &v, 0);
    check("peek: stable part only grows", v.data, v.len,
          (u_char *) "line1\nPART2\nx", 13);
    ok(v.stable == 12, "peek: stable after another line");

    view(t, &v, 1);
    check("take: same as peek", v.data, v.len,
          (u_char *) "line1\nPART2\nx", 13);
    ok(v.dropped == 0, "take: nothing dropped");

    view(t, &v, 1);
    ok(v.len == 0 && v.stable == 0, "take: nothing new gives empty");

    view(t, &v, 0);
    ok(v.len == 0, "peek: after take empty");

    /* reset forgets the line, the parser state and what was returned */
    feed(t, "abc\x1b]0;title", 12);
    ngx_pty_text_reset(t);
    feed(t, "def", 3);
    view(t, &v, 1);
    check("reset: forgets everything", v.data, v.len, (u_char *) "def", 3);

    ngx_pty_text_destroy(t);

    t = create();
    view(t, &v, 1);
    ok(v.len == 0 && v.data != NULL, "take: fresh converter empty");
    ngx_pty_text_destroy(t);

    ngx_pty_text_destroy(NULL);
    ok(1, "destroy: NULL is fine");
}


/* build a big input; the caller frees it */

static char *
repeat(const char *head, const char *unit, size_t times, const char *tail,
    size_t *len)
{
    char    *p, *q;
    size_t   hl, ul, tl;

    hl = strlen(head);
    ul = strlen(unit);
    tl = strlen(tail);

    p = malloc(hl + ul * times + tl + 1);
    if (p == NULL) {
        printf("Bail out! out of memory\n");
        exit(2);
    }

    q = p;
    memcpy(q, head, hl);
    q += hl;

    while (times--) {
        memcpy(q, unit, ul);
        q += ul;
    }

    memcpy(q, tail, tl);
    q += tl;

    *len = q - p;

    return p;
}


static void
big(const char *desc, char *in, size_t len, const char *exp, size_t exp_len)
{
    size_t   n;
    u_char  *r;
    char     d[256];

    r = settle_split(in, len, len / 3, &n);
    check(desc, r, n, (u_char *) exp, exp_len);
    free(r);

    r = settle_bytes(in, len, &n);
    snprintf(d, sizeof(d), "%s: byte by byte", desc);
    check(d, r, n, (u_char *) exp, exp_len);
    free(r);

    free(in);
}


static void
test_big(void)
{
    char    *in, *exp;
    size_t   len, n;

    /* 100,000 progress redraws: linear, and only the last one stays */
    in = repeat("", "\r 45%", 100000, "\r100%\r\n", &len);
    big("progress bar redrawn 100000 times", in, len, "100%\n", 5);

    in = repeat("", "\r\x1b[K\x1b[60000Cx", 100000, "", &len);
    exp = repeat("", " ", NGX_PTY_TEXT_MAX_JUMP, "x", &n);
    big("cursor motion past end is clamped", in, len, exp, n);
    free(exp);

    /* a 64 KiB-column line with 100,000 CR redraws at its start */
    in = repeat("", "a", NGX_PTY_TEXT_MAX_COLS - 1, "", &len);
    free(in);
    in = repeat("", "a", NGX_PTY_TEXT_MAX_COLS - 1, "", &len);
    {
        char    *in2;
        size_t   len2;

        in2 = repeat("", "\rX", 100000, "", &len2);
        in = realloc(in, len + len2);
        if (in == NULL) {
            printf("Bail out! out of memory\n");
            exit(2);
        }
        memcpy(in + len, in2, len2);
        free(in2);

        exp = repeat("X", "a", NGX_PTY_TEXT_MAX_COLS - 2, "", &n);
        big("long line with many CR redraws", in, len + len2, exp, n);
        free(exp);
    }

    in = repeat("", "a", NGX_PTY_TEXT_MAX_COLS + 4464, "", &len);
    exp = repeat("", "a", NGX_PTY_TEXT_MAX_COLS, "\n", &n);
    {
        char    *tail;
        size_t   tl;

        tail = repeat("", "a", 4464, "", &tl);
        exp = realloc(exp, n + tl);
        if (exp == NULL) {
            printf("Bail out! out of memory\n");
            exit(2);
        }
        memcpy(exp + n, tail, tl);
        free(tail);
        big("over-long line is force-broken", in, len, exp, n + tl);
        free(exp);
    }

    in = repeat("", "a", NGX_PTY_TEXT_MAX_COLS - 1, "\xe4\xb8\xad", &len);
    exp = repeat("", "a", NGX_PTY_TEXT_MAX_COLS - 1, "\n\xe4\xb8\xad", &n);
    big("wide char at the width cap moves to the next line", in, len,
        exp, n);
    free(exp);

    in = repeat("\x1b]", "x", NGX_PTY_TEXT_MAX_STRING + 100, "hi", &len);
    exp = repeat("", "x", 100, "hi", &n);
    big("unterminated OSC abandoned at the cap", in, len, exp, n);
    free(exp);

    in = repeat("\x1b]", "x", NGX_PTY_TEXT_MAX_STRING, "\x07hi", &len);
    big("OSC just under the cap still stripped", in, len, "hi", 2);
}


static void
test_dropped(void)
{
    int                   i;
    char                  line[32];
    ngx_pty_text_t       *t;
    ngx_pty_text_view_t   v;

    t = ngx_pty_text_create(4096);
    if (t == NULL) {
        printf("Bail out! out of memory\n");
        exit(2);
    }

    for (i = 0; i < 10000; i++) {
        snprintf(line, sizeof(line), "line %05d\r\n", i);
        feed(t, line, strlen(line));
    }

    view(t, &v, 1);

    ok(v.len <= 4096 && v.len >= 2048, "max_pending: text kept bounded");
    ok(v.dropped > 0 && v.dropped + v.len == 10000 * 11,
       "max_pending: dropped bytes counted");
    ok(v.len >= 11 && memcmp(v.data, "line ", 5) == 0,
       "max_pending: cut at a line boundary");
    ok(v.len >= 11 && memcmp(v.data + v.len - 11, "line 09999\n", 11) == 0,
       "max_pending: newest text kept");

    view(t, &v, 1);
    ok(v.len == 0 && v.dropped == 0, "max_pending: counter reset by take");

    ngx_pty_text_destroy(t);
}


/* a loss: the line ends as it was, a note follows, nothing joins them */

static void
test_break(void)
{
    ngx_pty_text_t       *t;
    ngx_pty_text_view_t   v;

    t = ngx_pty_text_create(0);
    if (t == NULL) {
        printf("Bail out! out of memory\n");
        exit(2);
    }

    feed(t, "total=", 6);
    view(t, &v, 1);

    /* cut inside an escape sequence and a UTF-8 character */
    feed(t, "\x1b[3", 4);
    ngx_pty_text_break(t);
    ngx_pty_text_note(t, (u_char *) "[lost]", 6);
    feed(t, "42\r\n", 4);
    view(t, &v, 1);
    check("break: the taken line ends, the note, then a new line",
          v.data, v.len, (u_char *) "\n[lost]\n42\n", 11);

    feed(t, "abc\xc3", 4);
    ngx_pty_text_break(t);
    feed(t, "def\r\n", 5);
    view(t, &v, 1);
    check("break: an unfinished line, never taken, ends as it was",
          v.data, v.len, (u_char *) "abc\ndef\n", 8);

    ngx_pty_text_destroy(t);
}


/* random control-heavy soup: any split gives the same as one feed */

static void
test_fuzz(void)
{
    static const char  *atoms[] = {
        "a", "b", " ", "\r", "\n", "\b", "\t", "\x1b", "[", "]", "?", ";",
        "1", "2", "K", "P", "@", "X", "C", "D", "G", "A", "B", "H", "J",
        "m", "\x07", "\\", "\xe4\xb8\xad", "\xcc\x81", "\xc3", "\xa9",
        "\xf0\x9f\x98\x80", "\xff", "\x18", "P", "_", "(", "M", "E"
    };

    int              round, bad;
    char             in[512];
    size_t           len, n1, n2, i, at;
    u_char          *r1, *r2;
    ngx_pty_text_t  *t;

    srand(12345);
    bad = 0;

    for (round = 0; round < 2000; round++) {
        len = 0;

        while (len < sizeof(in) - 8) {
            const char  *a = atoms[rand() % (sizeof(atoms) / sizeof(atoms[0]))];

            memcpy(in + len, a, strlen(a));
            len += strlen(a);
        }

        r1 = settle_split(in, len, len, &n1);

        at = rand() % (len + 1);
        r2 = settle_split(in, len, at, &n2);

        if (n1 != n2 || memcmp(r1, r2, n1) != 0) {
            bad++;
        }

        free(r2);

        /* random splits with takes in between must not crash either */
        t = create();

        for (i = 0; i < len; i += at % 17 + 1) {
            feed(t, in + i, (len - i < at % 17 + 1) ? len - i : at % 17 + 1);
            free(take_all(t, &n2));
        }

        ngx_pty_text_destroy(t);
        free(r1);
    }

    ok(bad == 0, "random soup: split feeds agree with one feed");
}


/* tests outside the table and the step lists: peek 12, big 14, dropped 5,
 * fuzz 1 */
#define FIXED_TESTS  34


static ngx_pty_text_step_t  *all_steps[] = {
    repl, echo_first, rewrite, cleared, restored, cleared_then_lf,
    bash_session, py313_session
};


int
main(void)
{
    size_t  i, j, n, plan;

    n = sizeof(cases) / sizeof(cases[0]);
    plan = n * 3 + FIXED_TESTS;

    for (i = 0; i < sizeof(all_steps) / sizeof(all_steps[0]); i++) {
        for (j = 0; all_steps[i][j].feed; j++) {
            plan++;
        }
    }

    printf("1..%zu\n", plan);

    for (i = 0; i < n; i++) {
        run_case(&cases[i]);
    }

    run_steps("REPL", repl);
    run_steps("echo peeked before take", echo_first);
    run_steps("rewritten line", rewrite);
    run_steps("cleared line", cleared);
    run_steps("restored line", restored);
    run_steps("cleared line then LF", cleared_then_lf);
    run_steps("bash session", bash_session);
    run_steps("python 3.13 session", py313_session);

    test_peek();
    test_big();
    test_dropped();
    test_break();
    test_fuzz();

    if ((size_t) test_no != plan) {
        printf("# ran %d tests, planned %zu\n", test_no, plan);
        return 1;
    }

    return failed ? 1 : 0;
}
