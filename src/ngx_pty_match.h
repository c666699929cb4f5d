
/*
 * What an agent waits for, and where in the settled text it may be
 * found: a literal (wait_for) or a PCRE2 regex (wait_for_regex), checked
 * against new text only, never against the terminal's echo of the
 * call's own input (docs/API.md, "What wait_for sees").
 */

#ifndef _NGX_PTY_MATCH_H_INCLUDED_
#define _NGX_PTY_MATCH_H_INCLUDED_


#include "ngx_pty.h"


typedef struct {
    ngx_str_t                  literal;
#if (NGX_PCRE)
    ngx_regex_t               *regex;
#endif
    ngx_str_t                  pattern;    /* the regex's text */
    unsigned                   failed:1;   /* logged that it failed */
} ngx_pty_matcher_t;


/* the lines an input types, as a line editor would echo them */
typedef struct {
    ngx_str_t                 *lines;
    ngx_uint_t                 n;
    ngx_uint_t                 submitted;  /* lines ended by CR or LF */
} ngx_pty_echo_t;


#define ngx_pty_matcher_set(m)  ((m)->literal.len || (m)->pattern.len)

/*
 * NULL, or why the literal can never be in settled text (written to
 * buf, 128 bytes).
 */
const char *ngx_pty_match_literal_check(ngx_str_t *s, u_char *buf);

/* NGX_OK, or NGX_DECLINED with the compiler's message in err */
ngx_int_t ngx_pty_match_regex(ngx_pool_t *pool, ngx_pty_matcher_t *m,
    ngx_str_t *pattern, ngx_str_t *err);

/* 1: found in text[0..len), 0: not */
ngx_uint_t ngx_pty_match_find(ngx_pty_matcher_t *m, u_char *text,
    size_t len, ngx_log_t *log);

/* the echo an input makes: NULL on no memory; n 0 when it types nothing */
ngx_pty_echo_t *ngx_pty_echo_create(ngx_pool_t *pool, u_char *input,
    size_t len);

/*
 * Where a match may lie in text[0..len), of which text[0..base) came
 * before the input: [*from, *to).  NGX_AGAIN: the echo is still coming.
 * With noecho (the terminal does not echo) no text is taken for echo.
 */
ngx_int_t ngx_pty_echo_region(ngx_pty_echo_t *e, u_char *text, size_t len,
    size_t base, ngx_uint_t noecho, size_t *from, size_t *to);


#endif /* _NGX_PTY_MATCH_H_INCLUDED_ */
