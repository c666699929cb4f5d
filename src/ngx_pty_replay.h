
/*
 * Replay from the archive: a pty.join_session whose replay_from is older
 * than the session's ring gets the frames from the archive (pty_archive),
 * read in the thread pool a page at a time as the client's send queue
 * drains, and then continues into the ring and the live frames at the
 * middle of what the ring holds: no gap, no frame twice, the same
 * ids and sequences as every other client saw.
 */

#ifndef _NGX_PTY_REPLAY_H_INCLUDED_
#define _NGX_PTY_REPLAY_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"
#include "ngx_pty_binding.h"


/* may the frames after sequence from come from the archive? */
ngx_uint_t ngx_pty_replay_possible(void);
/* NGX_OK: the archive replays; the ring walk waits for it */
ngx_int_t ngx_pty_replay_start(ngx_pty_client_t *cl, json_t *id,
    uint64_t from);
/* called first by every pull: 1 while the archive replays */
ngx_uint_t ngx_pty_replay_pull(ngx_pty_client_t *cl);
/* the client goes: a read in flight answers nobody */
void ngx_pty_replay_stop(ngx_pty_client_t *cl);


#endif /* _NGX_PTY_REPLAY_H_INCLUDED_ */
