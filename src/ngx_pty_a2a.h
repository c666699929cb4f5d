
/*
 * A2A tasks over pty-ws/v1: SendMessage, SendStreamingMessage, GetTask,
 * ListTasks, CancelTask, SubscribeToTask, Unsubscribe and
 * UpdateServiceParameters.  A task is one run of the agent engine's
 * write (ngx_pty_agent.c) on the connection's session; its events are
 * TaskStatusUpdate frames in the session's ring, so they take session
 * sequence numbers, replay and reach clients on every worker.
 */

#ifndef _NGX_PTY_A2A_H_INCLUDED_
#define _NGX_PTY_A2A_H_INCLUDED_


#include <jansson.h>

#include "ngx_pty.h"
#include "ngx_pty_binding.h"


/* NGX_DECLINED: op is not a task operation */
ngx_int_t ngx_pty_a2a_dispatch(ngx_pty_client_t *cl, json_t *msg,
    const char *op, json_t *id);
/* the connection is closing: its waits end, its tasks run on */
void ngx_pty_a2a_closed(ngx_pty_client_t *cl);
/* under the session lock: whether a client that did not join gets f */
ngx_uint_t ngx_pty_a2a_wants(ngx_pty_client_t *cl, ngx_pty_frame_t *f);
/* a TaskStatusUpdate frame of the ring, as sent */
u_char *ngx_pty_a2a_frame_write(u_char *p, ngx_pty_frame_t *f);


#endif /* _NGX_PTY_A2A_H_INCLUDED_ */
