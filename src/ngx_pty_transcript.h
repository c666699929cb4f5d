
/*
 * What the archive keeps, through the agent API: `history` lists the
 * sessions it has (of this nginx run and earlier ones), `transcript`
 * returns one session's frames by sequence range, as the WebSocket sent
 * them, and the settled text of their output.  Both read the archive in
 * a thread (ngx_pty_archive.h) and apply each session's stored access
 * list, as every other call does with the zone's.
 */

#ifndef _NGX_PTY_TRANSCRIPT_H_INCLUDED_
#define _NGX_PTY_TRANSCRIPT_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"


/* the API's calls beside the agent engine's tools: below NGX_ERROR */
#define NGX_PTY_TRANSCRIPT_HISTORY  -2
#define NGX_PTY_TRANSCRIPT_FRAMES   -3

/* the call by name, or tool (the engine's answer for that name) */
ngx_int_t ngx_pty_transcript_find(ngx_str_t *name, ngx_int_t tool);

/* NGX_DONE (answered later), or a status to finalize with */
ngx_int_t ngx_pty_transcript_call(ngx_http_request_t *r, ngx_int_t call,
    json_t *req);


#endif /* _NGX_PTY_TRANSCRIPT_H_INCLUDED_ */
