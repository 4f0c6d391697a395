import { sleep } from './promises.js';

/** Poll until `condition` holds; the deadline only turns a hang into a readable failure. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string | (() => string),
  timeoutMs = 20_000,
): Promise<void> {
  if (await settle(condition, timeoutMs)) return;
  throw new Error(`timed out waiting for ${typeof what === 'string' ? what : what()}`);
}

/** Poll until `condition` holds or `timeoutMs` passes; says which. The assertions that follow tell what is wrong. */
export async function settle(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 20_000,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
}

/** Poll `predicate` every few ms until it holds; reject after `timeoutMs`. Leaves no timer behind. */
export async function waitUntil(
  predicate: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
  intervalMs = 5,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise<void>((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** `promise`, or a rejection naming `what` after `timeoutMs`. Leaves no timer behind. */
export async function within<T>(promise: Promise<T>, what: string, timeoutMs = 10_000): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
