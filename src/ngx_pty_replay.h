
/*
 * Replay older than the ring.  A joiner's replay_from that the ring no
 * longer holds is served from the archive (ngx_pty_archive.h), read in a
 * thread a send buffer at a time, and its walk goes on in the ring from
 * the first frame the archive did not give: the same frames, ids and
 * sequences a live client got, with no gap and no duplicate.  Only when
 * the archive does not have them either is the answer
 * REPLAY_OUT_OF_RANGE and a Keyframe, as without an archive.
 */

#ifndef _NGX_PTY_REPLAY_H_INCLUDED_
#define _NGX_PTY_REPLAY_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"
#include "ngx_pty_binding.h"


/* under the session lock, at join: 1 if the archive takes the replay */
ngx_uint_t ngx_pty_replay_start(ngx_pty_client_t *cl, uint64_t from,
    json_t *id);
/* instead of the ring walk while the archive part lasts */
void ngx_pty_replay_pull(ngx_pty_client_t *cl);
/* the client goes: a read in flight is left to free itself */
void ngx_pty_replay_stop(ngx_pty_client_t *cl);


#endif /* _NGX_PTY_REPLAY_H_INCLUDED_ */
