/*
 * Runs the broker's Lua scripts with EVALSHA, falling back to EVAL, in call order. Publishes
 * are script calls, so this is what keeps one node's publishes in the order they were made even
 * when Redis lost its script cache: the NOSCRIPT gate below must not let a later call overtake
 * an earlier one that is being resent.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { toError } from './redis-errors.js';

/** A Lua script and its SHA1, as EVALSHA wants it. */
export interface Script {
  lua: string;
  sha: string;
}

export function script(lua: string): Script {
  return { lua, sha: createHash('sha1').update(lua).digest('hex') };
}

export class RedisScriptRunner {
  /** Script calls sent and not yet answered (or, after NOSCRIPT, not yet sent again as EVAL). */
  private scriptCalls = 0;
  /** Set from a NOSCRIPT reply until every earlier call is settled: new calls wait for it. */
  private scriptRecovery: { done: Promise<void>; release: () => void } | undefined;

  /**
   * `command` is the connection scripts run on; `unavailable` turns a failure that is not a
   * Redis error reply into the broker's "unavailable" error.
   */
  constructor(
    private readonly command: Redis,
    private readonly unavailable: (cause: Error) => Error,
  ) {}

  /**
   * EVALSHA, falling back to EVAL when Redis does not have the script (yet, or any more: a
   * restart, SCRIPT FLUSH), without reordering: once a call fails with NOSCRIPT, later calls
   * wait until every call sent before that failure has been answered or sent again as EVAL,
   * so they reach Redis after those EVALs, in the order they were made.
   */
  async run(which: Script, keys: string[], args: string[]): Promise<unknown> {
    while (this.scriptRecovery) await this.scriptRecovery.done;
    this.scriptCalls++;
    let settled = false;
    const settle = (): void => {
      if (settled) return;
      settled = true;
      if (--this.scriptCalls === 0 && this.scriptRecovery) {
        this.scriptRecovery.release();
        this.scriptRecovery = undefined;
      }
    };
    try {
      let reply: Promise<unknown>;
      try {
        reply = Promise.resolve(
          await this.command.evalsha(which.sha, keys.length, ...keys, ...args),
        );
      } catch (error) {
        if (!toError(error).message.startsWith('NOSCRIPT')) throw error;
        this.startScriptRecovery();
        // Sent now, before this call counts as settled: later calls go after it.
        reply = this.command.eval(which.lua, keys.length, ...keys, ...args);
      }
      settle();
      return await reply;
    } catch (error) {
      const err = toError(error);
      // An error reply from Redis itself (OOM, WRONGTYPE, ...) is not an outage.
      if (err.name === 'ReplyError')
        throw new Error(`Redis broker: ${err.message}`, { cause: error });
      throw this.unavailable(err);
    } finally {
      settle();
    }
  }

  private startScriptRecovery(): void {
    if (this.scriptRecovery) return;
    let release!: () => void;
    const done = new Promise<void>((resolve) => (release = resolve));
    this.scriptRecovery = { done, release };
  }
}
