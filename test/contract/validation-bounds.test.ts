/**
 * What a -32602 from contract validation carries is bounded whatever the params: at most
 * MAX_REPORTED_ISSUES issues (the rest counted in `omitted`), each path key and message cut to a
 * bound, so a request that fails in many places, or under a huge record key, is never answered
 * with a reply many times its size (a 100 KB key under 1,000 failing items made 100 MB).
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineContract } from '../../src/contract/contract.js';
import {
  MAX_ISSUE_KEY_CHARS,
  MAX_ISSUE_MESSAGE_CHARS,
  MAX_REPORTED_ISSUES,
  validateParams,
} from '../../src/contract/validate.js';
import type { ValidationIssues } from '../../src/contract/validate.js';
import { InvalidParamsError } from '../../src/protocol/errors.js';
import type { Params } from '../../src/protocol/types.js';
import { implementContract } from '../../src/server/contract-server.js';
import { Resources } from '../support/resources.js';
import WebSocket from 'ws';

const res = new Resources();
afterEach(() => res.cleanup());

const contract = defineContract({
  name: 'bounds',
  version: '1.0.0',
  methods: {
    sum: { params: z.object({ values: z.array(z.number()) }), result: z.number() },
    tally: {
      params: z.object({ counts: z.record(z.string(), z.array(z.number())) }),
      result: z.number(),
    },
  },
});

function issuesOf(method: 'sum' | 'tally', params: Params): ValidationIssues {
  try {
    validateParams(contract.methods[method]!, params);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidParamsError);
    return (err as InvalidParamsError).data as ValidationIssues;
  }
  throw new Error('validated');
}

/** The largest `data` any failure can carry: every issue at its bounds. */
const keyBytes = MAX_ISSUE_KEY_CHARS * 6 + 2;
const BOUND = 200 + MAX_REPORTED_ISSUES * (MAX_ISSUE_MESSAGE_CHARS * 6 + 64 * keyBytes + 64);

describe('a validation failure’s data', () => {
  it('reports at most MAX_REPORTED_ISSUES issues, the rest counted in omitted', () => {
    const data = issuesOf('sum', { values: Array<string>(1_000).fill('') });
    expect(data.issues).toHaveLength(MAX_REPORTED_ISSUES);
    expect(data.omitted).toBe(1_000 - MAX_REPORTED_ISSUES);
    expect(data.issues[0]!.path).toEqual(['values', 0]);
    // Under the bound, all of them, and no omitted member.
    const few = issuesOf('sum', { values: ['', 1, ''] });
    expect(few.issues.map((issue) => issue.path)).toEqual([
      ['values', 0],
      ['values', 2],
    ]);
    expect('omitted' in few).toBe(false);
  });

  it('cuts a path key longer than MAX_ISSUE_KEY_CHARS', () => {
    const key = 'k'.repeat(100_000);
    const data = issuesOf('tally', { counts: { [key]: ['', ''] } });
    const cut = data.issues[0]!.path[1] as string;
    expect(cut.length).toBeLessThanOrEqual(MAX_ISSUE_KEY_CHARS + 1);
    expect(key.startsWith(cut.slice(0, -1))).toBe(true);
  });

  it('is bounded for any params, however many failures and however long their keys', () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string({ minLength: 0, maxLength: 2_000 }),
          fc.array(fc.oneof(fc.string(), fc.integer(), fc.constant(null)), { maxLength: 50 }),
          { maxKeys: 30 },
        ),
        (counts) => {
          let data: ValidationIssues;
          try {
            validateParams(contract.methods.tally!, { counts });
            return;
          } catch (err) {
            data = (err as InvalidParamsError).data as ValidationIssues;
          }
          expect(data.issues.length).toBeLessThanOrEqual(MAX_REPORTED_ISSUES);
          expect(JSON.stringify(data).length).toBeLessThanOrEqual(BOUND);
          for (const issue of data.issues) {
            expect(issue.message.length).toBeLessThanOrEqual(MAX_ISSUE_MESSAGE_CHARS + 1);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it('over the wire: a request with a huge key under many failing items gets a small reply', async () => {
    const { gateway, url } = await res.gateway({ limits: { maxMessageBytes: 1 << 20 } });
    implementContract(gateway, contract, { methods: { sum: () => 0, tally: () => 0 } });
    const socket = new WebSocket(url);
    res.track(socket);
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const key = 'k'.repeat(100_000);
    const request = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tally',
      params: { counts: { [key]: Array<string>(1_000).fill('') } },
    });
    const answered = new Promise<string>((resolve) =>
      socket.once('message', (data) => resolve((data as Buffer).toString('utf8'))),
    );
    socket.send(request);
    const reply = await answered;
    expect(reply.length).toBeLessThan(request.length / 10);
    expect(JSON.parse(reply)).toMatchObject({
      id: 1,
      error: { code: -32602, data: { omitted: 1_000 - MAX_REPORTED_ISSUES } },
    });
  });
});
