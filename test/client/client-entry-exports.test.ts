/**
 * The client's entry (`wsrpc-gateway/client`, and the package root under the `browser`
 * condition) is the root's client part: every value it exports is the very one the root exports,
 * so code that mixes the two imports shares classes (`instanceof` holds), and what a browser app
 * reaches for from the root (the client, its errors, `silentLogger`, `CloseCode`) is there.
 */
import { describe, expect, it } from 'vitest';
import * as client from '../../src/client/index.js';
import * as root from '../../src/index.js';

describe('the client entry', () => {
  it('exports nothing the root does not, each the same value', () => {
    const rootExports = root as Record<string, unknown>;
    for (const [name, value] of Object.entries(client)) {
      expect({ name, same: rootExports[name] === value }).toEqual({ name, same: true });
    }
  });

  it('has what a browser app takes from the root besides the client: silentLogger, CloseCode', () => {
    expect(client.silentLogger).toBe(root.silentLogger);
    expect(client.CloseCode).toBe(root.CloseCode);
    expect(client.CloseCode.ServiceRestart).toBe(1012);
  });
});
