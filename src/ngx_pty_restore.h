
/*
 * An ended session that only the archive knows (one of an earlier nginx
 * run, or one the zone has forgotten) is brought back into the zone when
 * a client attaches to it: its record, its access list and the frames
 * from its last Keyframe to its Closed, read in the thread pool.  It is
 * then an ended session like any other for the closed linger time: a
 * join gets the final screen and Closed, a replay_from older than that
 * is served from the archive, and nothing of it is stored again.
 */

#ifndef _NGX_PTY_RESTORE_H_INCLUDED_
#define _NGX_PTY_RESTORE_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_shm.h"


/* answers the request for the session, which it then holds a reference of */
typedef ngx_int_t (*ngx_pty_restore_pt)(ngx_http_request_t *r,
    ngx_pty_session_sh_t *sh);

/*
 * NGX_DONE: the archive is asked, and handler or a refusal answers the
 * request; NGX_DECLINED: there is no archive; else a status to answer.
 */
ngx_int_t ngx_pty_restore_attach(ngx_http_request_t *r, ngx_str_t *id,
    ngx_pty_restore_pt handler);


#endif /* _NGX_PTY_RESTORE_H_INCLUDED_ */
