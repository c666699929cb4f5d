
/*
 * pty_mcp: the agent tools as a Model Context Protocol server over the
 * Streamable HTTP transport (JSON-RPC 2.0 over POST), docs/MCP.md.
 */

#ifndef _NGX_PTY_MCP_H_INCLUDED_
#define _NGX_PTY_MCP_H_INCLUDED_


#include "ngx_pty.h"


ngx_int_t ngx_pty_mcp_handler(ngx_http_request_t *r);


#endif /* _NGX_PTY_MCP_H_INCLUDED_ */
