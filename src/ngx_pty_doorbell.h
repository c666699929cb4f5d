
/*
 * Doorbells: how one worker wakes another without polling.  Each worker
 * binds an abstract unix datagram socket named after the zone's nonce and
 * its pid, and registers its pid in a slot of the zone's worker table.
 * Ringing sends a one-byte datagram; a per-slot "rung" flag in the zone
 * coalesces rings until the woken worker has looked, so a busy session
 * costs one datagram per wake-up, not per frame.  Workers started by a
 * later reload are reachable too: the address is computed, not inherited.
 */

#ifndef _NGX_PTY_DOORBELL_H_INCLUDED_
#define _NGX_PTY_DOORBELL_H_INCLUDED_


#include "ngx_pty.h"
#include "ngx_pty_shm.h"


/* what a datagram asks for */
#define NGX_PTY_BELL_WAKE     'w'    /* sessions have news for you */
#define NGX_PTY_BELL_ORPHANS  'o'    /* sessions may have lost their owner */


ngx_int_t ngx_pty_doorbell_init(ngx_cycle_t *cycle);
void ngx_pty_doorbell_exit(void);

/* this worker's bit in listen_mask and wake_mask; 0 without a doorbell */
ngx_atomic_uint_t ngx_pty_doorbell_bit(void);

/* marks the session for the workers in mask (but us) and rings them */
void ngx_pty_doorbell_wake(ngx_pty_session_sh_t *sh, ngx_atomic_uint_t mask);

/* the bit of the worker with this pid, 0 if it has no doorbell */
ngx_atomic_uint_t ngx_pty_doorbell_bit_of(ngx_pid_t pid);

/* asks every other worker to look for sessions without a live owner */
void ngx_pty_doorbell_orphans(void);


#endif /* _NGX_PTY_DOORBELL_H_INCLUDED_ */
