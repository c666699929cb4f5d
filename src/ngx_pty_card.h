
/*
 * The AgentCard (A2A discovery document) of this instance, as JSON: the
 * pty-extensions/v1 params actually in force and the pty-ws/v1 binding.
 */

#ifndef _NGX_PTY_CARD_H_INCLUDED_
#define _NGX_PTY_CARD_H_INCLUDED_


#include "ngx_pty.h"


ngx_int_t ngx_pty_card_handler(ngx_http_request_t *r);


#endif /* _NGX_PTY_CARD_H_INCLUDED_ */
