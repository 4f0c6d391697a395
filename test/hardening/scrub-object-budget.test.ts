/**
 * What the logger scrubs is bounded by the objects it looks into, not only by depth: an object
 * whose members all lead back to it (which application code can log) has exponentially many
 * paths within the depth limit, and walking each would hold the event loop for good. Past the
 * budget the rest is written "[Truncated]"; secrets met before are still blanked.
 */
import { expect, it } from 'vitest';
import { scrubLogged } from '../../src/server/logger.js';

it('an object whose 50 members each lead back to it is scrubbed, cut past the budget', () => {
  const knot: Record<string, unknown> = { token: 'SECRET-TOKEN' };
  for (let i = 0; i < 50; i++) knot[`m${i}`] = knot;
  const scrubbed = scrubLogged({ knot }) as { knot: Record<string, unknown> };
  const text = JSON.stringify(scrubbed);
  expect(text).not.toContain('SECRET-TOKEN');
  expect(text).toContain('[Truncated]');
  expect(scrubbed.knot['token']).not.toBe('SECRET-TOKEN');
});
