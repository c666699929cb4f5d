
/*
 * ngx_pty_module: input escape decoding.
 *
 * Text an agent sends to pty-write may spell bytes as backslash escapes;
 * they are decoded here into the real bytes written to the PTY.  The JSON
 * layer has already decoded JSON escapes, so this works on the decoded
 * string: JSON "\\x03" arrives as the 4 chars \x03, JSON "\u0003" arrives
 * as the byte 0x03, and both end up as 0x03 (Ctrl-C).
 *
 * Rules:
 *   \r \n \t        CR, LF, TAB
 *   \e              ESC (0x1b)
 *   \\              one backslash
 *   \xHH            the byte 0xHH; exactly 2 hex digits, either case;
 *                   \x00 gives a real NUL byte
 *   \uHHHH          the code point U+HHHH encoded as UTF-8; exactly 4 hex
 *                   digits, either case; \u0000 gives a real NUL byte
 *   \uD8xx\uDCxx    a high + low surrogate pair is combined into one code
 *                   point (\uD83D\uDE00 -> U+1F600, 4 bytes of UTF-8)
 *
 * Edge cases:
 *   - unknown escapes (\a, \0, \q, ...) pass through unchanged: both the
 *     backslash and the following character are kept;
 *   - a trailing lone backslash is kept as a backslash;
 *   - short or invalid hex (\x4, \xZZ, \u12, \u12G4) is not an escape and
 *     passes through unchanged (backslash kept, the rest decoded normally);
 *   - a lone surrogate (\uD83D alone or followed by anything that is not
 *     a \u low surrogate, or a low surrogate with no high one before it)
 *     becomes U+FFFD (EF BF BD): UTF-8 cannot encode surrogates, so the
 *     program would see an invalid sequence anyway, and sending the 6
 *     literal characters would silently type text the agent did not mean.
 *     Whatever follows the lone high surrogate is decoded normally.
 *
 * Output never exceeds input: every escape is at least as long as what it
 * produces (\xHH 4 -> 1, \uHHHH 6 -> at most 3, a pair 12 -> 4, U+FFFD
 * 6 -> 3), so decoding in place (out == in) is also safe.
 */


#ifndef _NGX_PTY_ESCAPE_H_INCLUDED_
#define _NGX_PTY_ESCAPE_H_INCLUDED_


#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef _NGX_CONFIG_H_INCLUDED_
typedef unsigned char  u_char;
#endif


/* out must have room for len bytes; returns the number of bytes written */
size_t ngx_pty_escape_decode(u_char *out, const u_char *in, size_t len);


#endif /* _NGX_PTY_ESCAPE_H_INCLUDED_ */
