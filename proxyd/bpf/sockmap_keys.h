/* Shared by the BPF program and proxyd/sockmap.c. */
#ifndef PX_SOCKMAP_KEYS_H
#define PX_SOCKMAP_KEYS_H

/* Two keys per relayed session: 32768 sessions in the kernel at once;
 * more fall back to splice. */
#define PX_SOCKMAP_KEYS	65536

#endif
