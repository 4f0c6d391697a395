import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import type { Browser } from 'playwright-core';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
export const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
export const inCi = process.env['CI'] === 'true';

/** Why browser tests cannot run here, or undefined when they can. In CI they must run. */
export function browserMissing(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  const reason = `no Chromium at ${CHROMIUM} (apt-get install -y chromium)`;
  if (inCi) throw new Error(`CI=true but ${reason}`);
  return reason;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}
