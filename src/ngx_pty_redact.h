
/*
 * Secret redaction (the extension's section 10.3): a session's output is
 * masked as the owner reads it, before it enters the ring, so the screen
 * model, its Keyframes and the archive see masked bytes, and so does
 * every client unless pty_redact's list or pty:reveal shows it what the
 * spans hid (ngx_pty_reveal.h).  Each byte of a secret becomes '*'
 * (a run of ten or more starts with "[REDACTED]"): lengths, columns and
 * offsets stay as the program wrote them.  A secret split across reads
 * is caught: output that may be the start of one is held back until the
 * next read tells, or pty_redact_wait passes.
 */

#ifndef _NGX_PTY_REDACT_H_INCLUDED_
#define _NGX_PTY_REDACT_H_INCLUDED_


#include "ngx_pty.h"


#define NGX_PTY_REDACT_HOLD     4096        /* bytes held back at most */
#define NGX_PTY_REDACT_CONTEXT  256         /* bytes seen, kept to match */


#define NGX_PTY_REDACT_SPANS    128         /* one read's last, kept */

/*
 * pty_redact: which WebSocket clients are shown masked output (the rest
 * are shown it raw); everything else is always masked
 */
#define NGX_PTY_REDACT_CONTROLLER  0x01
#define NGX_PTY_REDACT_OBSERVERS   0x02
#define NGX_PTY_REDACT_REPLAY      0x04
#define NGX_PTY_REDACT_ALL         0x07
#define NGX_PTY_REDACT_OFF         0x08     /* until merged, then 0 */


typedef struct ngx_pty_redact_s  ngx_pty_redact_t;

/* a masked span of the last output: out[pos, pos + len) was raw[] */
typedef struct {
    size_t                     pos;
    size_t                     len;
    u_char                    *raw;
} ngx_pty_redact_span_t;


/* http level: what is a secret */
struct ngx_pty_redact_conf_s {
    ngx_flag_t                 builtin;       /* pty_redact_builtin */
    ngx_msec_t                 wait;          /* pty_redact_wait */
    ngx_array_t               *patterns;      /* ngx_str_t: pty_redact_pattern */
    ngx_array_t               *files;         /* ngx_str_t: pty_redact_secrets */
    ngx_regex_t               *regex;         /* all of them, one alternation */
};


extern ngx_conf_bitmask_t  ngx_pty_redact_who[];   /* pty_redact's words */

/* NGX_PTY_REDACT_* bits of the location, 0 when off; NGX_CONF_ERROR */
char *ngx_pty_redact_merge(ngx_conf_t *cf, ngx_uint_t *conf, ngx_uint_t prev);
char *ngx_pty_redact_pattern(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_pty_redact_secrets(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_pty_redact_builtin(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
char *ngx_pty_redact_wait(ngx_conf_t *cf, ngx_command_t *cmd, void *conf);
/* builds the alternation at the end of the http block; NGX_CONF_ERROR */
char *ngx_pty_redact_init_conf(ngx_conf_t *cf, ngx_pty_redact_conf_t *rc);

/* NULL: out of memory, or nothing to redact with */
ngx_pty_redact_t *ngx_pty_redact_create(ngx_pty_redact_conf_t *rc,
    ngx_log_t *log);
void ngx_pty_redact_destroy(ngx_pty_redact_t *r);

/*
 * Takes a read of n bytes, NGX_PTY_READ_CHUNK at most (full: the read
 * filled its buffer, more comes at once), and returns in *out the masked
 * bytes ready to store, which may be fewer (some held back) or more
 * (held bytes let go).
 */
size_t ngx_pty_redact_feed(ngx_pty_redact_t *r, u_char *in, size_t n,
    ngx_uint_t full, u_char **out);
/* everything held, masked where it is a whole secret */
size_t ngx_pty_redact_flush(ngx_pty_redact_t *r, u_char **out);
size_t ngx_pty_redact_held(ngx_pty_redact_t *r);
/* the masked spans of the last feed's or flush's output */
ngx_uint_t ngx_pty_redact_spans(ngx_pty_redact_t *r,
    ngx_pty_redact_span_t **spans);
/* a whole text's secrets masked in place: how many, or NGX_ERROR */
ngx_int_t ngx_pty_redact_text(ngx_pty_redact_conf_t *conf, u_char *p,
    size_t len);
/* a masked copy to free, p itself when it holds none, NULL: no memory */
u_char *ngx_pty_redact_copy(const u_char *p, size_t len, ngx_log_t *log);


#endif /* _NGX_PTY_REDACT_H_INCLUDED_ */
