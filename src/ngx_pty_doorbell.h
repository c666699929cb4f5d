
/*
 * Doorbells: how one worker wakes another without polling.  Each worker
 * binds an abstract unix datagram socket named after the zone's nonce and
 * its pid, and registers its pid in a slot of the zone's worker table.
 * Ringing sends a one-byte datagram; a per-slot "rung" flag in the zone
 * coalesces rings until the woken worker has looked, so a busy session
 * costs one datagram per wake-up, not per frame.  Workers started by a
 * later reload are reachable too: the address is computed, not inherited.
 * Any local user can send to an abstract address, so each datagram's
 * sender is checked (SO_PASSCRED): only the workers' user may ring.
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

/* this worker's slot in the worker table (its bit in the masks); -1 if none */
ngx_int_t ngx_pty_doorbell_slot(void);

/* the slot of the worker with this pid, -1 if it has no doorbell */
ngx_int_t ngx_pty_doorbell_slot_of(ngx_pid_t pid);

/* sets or clears a slot's bit (slot -1: nothing) */
void ngx_pty_mask_set(ngx_pty_mask_t *m, ngx_int_t slot, ngx_uint_t on);

/* clears a slot's bit; returns whether it was set */
ngx_uint_t ngx_pty_mask_take(ngx_pty_mask_t *m, ngx_int_t slot);

/* marks the session for the workers in mask (but us) and rings them */
void ngx_pty_doorbell_wake(ngx_pty_session_sh_t *sh,
    const ngx_pty_mask_t *mask);

/* the same for one worker's slot (-1: nothing) */
void ngx_pty_doorbell_wake_slot(ngx_pty_session_sh_t *sh, ngx_int_t slot);

/* asks every other worker to look for sessions without a live owner */
void ngx_pty_doorbell_orphans(void);


#endif /* _NGX_PTY_DOORBELL_H_INCLUDED_ */
