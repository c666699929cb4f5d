
/*
 * The module's HTTP edges: in its locations every error is JSON, nginx's
 * own error pages included, and the error log's request context carries
 * no query string (tokens ride in them) and no Referer.
 */

#ifndef _NGX_PTY_HTTP_H_INCLUDED_
#define _NGX_PTY_HTTP_H_INCLUDED_


#include "ngx_pty.h"


/* postconfiguration: the filters that turn nginx's error pages into JSON */
ngx_int_t ngx_pty_http_init(ngx_conf_t *cf);

/* the request's log lines from now on name it without its query string */
void ngx_pty_http_log_hide(ngx_http_request_t *r);


#endif /* _NGX_PTY_HTTP_H_INCLUDED_ */
