/**
 * sameHost, the origin check without `allowedOrigins`: a browser's Origin is admitted exactly
 * when its host name is the one its request was sent to (the Host header), whatever the ports and
 * the letters' case, and, for a request known to have come over TLS, when it is an https page;
 * an Origin that is no URL never is.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sameHost } from '../../src/server/admission.js';

/** A DNS label starting with a letter (a last label of digits would read as an IPv4 address). */
const label = fc.stringMatching(/^[a-z](?:[a-z0-9-]{0,8}[a-z0-9])?$/);
const name = fc.array(label, { minLength: 1, maxLength: 3 }).map((labels) => labels.join('.'));
const ipv4 = fc.ipV4();
const ipv6 = fc.ipV6().map((address) => `[${address}]`);
const host = fc.oneof(name, ipv4, ipv6);
const port = fc.option(fc.integer({ min: 1, max: 65_535 }), { nil: undefined });
const withPort = (h: string, p: number | undefined) => (p === undefined ? h : `${h}:${p}`);
/** Some letters upper-cased: host names compare without case. */
const shout = (h: string, mask: number) =>
  [...h].map((c, i) => ((mask >> (i % 31)) & 1 ? c.toUpperCase() : c)).join('');

describe('sameHost', () => {
  it('admits exactly the Origins whose host is the Host header’s, any port or case, https over TLS', () => {
    fc.assert(
      fc.property(
        host,
        host,
        fc.constantFrom('http', 'https'),
        port,
        port,
        fc.integer(),
        fc.boolean(),
        fc.boolean(),
        (pageHost, requestHost, scheme, pagePort, requestPort, mask, same, tls) => {
          const target = same ? pageHost : requestHost;
          const origin = `${scheme}://${withPort(shout(pageHost, mask), pagePort)}`;
          const header = withPort(target, requestPort);
          // The model: host names equal once both are read as URLs read them (lower case, IPv6
          // and IPv4 written one way), and over TLS a page that is https.
          const expected =
            new URL(`http://${pageHost}`).hostname === new URL(`http://${target}`).hostname &&
            (!tls || scheme === 'https');
          expect(sameHost(origin, header, tls)).toBe(expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('never admits an Origin that is no URL, or a request without a Host header', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('null', '', 'app.example.com', '://x', 'http://'),
        host,
        (origin, h) => {
          expect(sameHost(origin, h)).toBe(false);
        },
      ),
    );
    expect(sameHost('https://app.example.com', undefined)).toBe(false);
    // The last answer is kept for the same pair only.
    expect(sameHost('https://a.example', 'a.example')).toBe(true);
    expect(sameHost('https://a.example', 'b.example')).toBe(false);
    expect(sameHost('https://b.example', 'b.example')).toBe(true);
    expect(sameHost('http://b.example', 'b.example')).toBe(true);
    expect(sameHost('http://b.example', 'b.example', true)).toBe(false);
  });
});
