/** The limits of the replay-buffer tests' transports: a 1 MiB buffer, nothing lapsing by age. */
import type { SseLimits } from '../../src/transport/sse-transport.js';

export const REPLAY_BYTES = 1024 * 1024;

export const replayLimits: SseLimits = {
  replayBytes: REPLAY_BYTES,
  replayMs: 600_000,
  graceMs: 600_000,
  maxBufferedBytes: 0,
  heartbeatMs: 15_000,
};
