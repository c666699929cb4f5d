
/*
 * The agent tool "transcript": a session's frames by sequence range and
 * the settled text of its output, from the archive (pty_archive) and,
 * for a session still in the zone, from its ring past what the archive
 * holds.  Sessions of an earlier nginx run are read the same way.
 */

#ifndef _NGX_PTY_TRANSCRIPT_H_INCLUDED_
#define _NGX_PTY_TRANSCRIPT_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"
#include "ngx_pty_agent.h"


ngx_int_t ngx_pty_transcript_tool(ngx_pty_agent_call_t *call, json_t *args);
/* list's "archived": answer (taken) gets the archive's ended sessions */
ngx_int_t ngx_pty_transcript_list(ngx_pty_agent_call_t *call, json_t *answer,
    ngx_uint_t limit, ngx_str_t *command);


#endif /* _NGX_PTY_TRANSCRIPT_H_INCLUDED_ */
