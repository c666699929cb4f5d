
/*
 * Small helpers every subsystem uses: UUIDv7 ids, RFC 3339 timestamps,
 * JSON string escaping for hand-built frames, escaping for the log.
 */

#ifndef _NGX_PTY_UTIL_H_INCLUDED_
#define _NGX_PTY_UTIL_H_INCLUDED_


#include "ngx_pty.h"


/* copies a string literal; its length is the compiler's to count */
#define ngx_pty_cpylit(p, lit)  ngx_cpymem(p, lit, sizeof(lit) - 1)

#define NGX_PTY_TS_LEN  (sizeof("2026-01-01T00:00:00.000Z") - 1)


/* 16 raw bytes of a UUIDv7 for the given unix time in milliseconds */
void ngx_pty_uuid7(u_char *raw, uint64_t ms);
/* the same, from a per-process generator: unique, not unguessable */
void ngx_pty_uuid7_fast(u_char *raw, uint64_t ms);
/* text form, NGX_PTY_ID_LEN bytes, not terminated; returns the end */
u_char *ngx_pty_uuid_format(u_char *dst, const u_char *raw);
u_char *ngx_pty_uuid7_text(u_char *dst);
ngx_int_t ngx_pty_uuid_valid(u_char *p, size_t len);

uint64_t ngx_pty_now_ms(void);
u_char *ngx_pty_ts_format(u_char *dst, uint64_t ms);

/* bytes needed to write s as a JSON string body (no quotes) */
size_t ngx_pty_json_escape_len(const u_char *s, size_t len);
u_char *ngx_pty_json_escape(u_char *dst, const u_char *s, size_t len);

ngx_int_t ngx_pty_random(void *buf, size_t len);

/* a location by its name, which survives reloads (pty_max_sessions) */
uint32_t ngx_pty_loc_tag(ngx_str_t *name);

/*
 * Text from a client or a program, made safe for the error log: control
 * bytes, '"', '\\' and bytes >= 0x7f become \xNN, so nothing can end a
 * line or pass for something else.  At most size - 1 bytes are written,
 * whole escapes only, then "..." when it was cut; returns the length.
 */
#define NGX_PTY_LOG_STR  256
size_t ngx_pty_log_escape(u_char *dst, size_t size, const u_char *s,
    size_t len);


#endif /* _NGX_PTY_UTIL_H_INCLUDED_ */
