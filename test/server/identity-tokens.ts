// Test tokens for the identity tests: `user=ann;ttl=500;topics=news.*,sports.x;methods=echo`,
// read by a hook that needs no key. ttl is ms from when the hook reads it.
import type { GatewayOptions } from '../../src/server/options.js';
import { UpgradeRejection } from '../../src/server/upgrade-rejection.js';

export interface TestContext {
  user: string;
  expiresAt: number | undefined;
  topics: string[] | undefined;
  methods: string[] | undefined;
}

export function token(fields: {
  user: string;
  ttl?: number;
  topics?: string[];
  methods?: string[];
}): string {
  const parts = [`user=${fields.user}`];
  if (fields.ttl !== undefined) parts.push(`ttl=${fields.ttl}`);
  if (fields.topics) parts.push(`topics=${fields.topics.join(',')}`);
  if (fields.methods) parts.push(`methods=${fields.methods.join(',')}`);
  return parts.join(';');
}

function read(text: string | undefined): TestContext {
  if (!text?.startsWith('user=')) throw new UpgradeRejection(401, 'invalid token');
  const fields = new Map(text.split(';').map((part) => part.split('=') as [string, string]));
  const list = (name: string): string[] | undefined =>
    fields.has(name) ? fields.get(name)!.split(',').filter(Boolean) : undefined;
  const ttl = fields.get('ttl');
  return {
    user: fields.get('user')!,
    expiresAt: ttl === undefined ? undefined : Date.now() + Number(ttl),
    topics: list('topics'),
    methods: list('methods'),
  };
}

/** The gateway options of a service whose identity comes from these tokens. */
export function tokenIdentity(
  identity: GatewayOptions<TestContext>['identity'] = {},
): Pick<GatewayOptions<TestContext>, 'authenticate' | 'userOf' | 'identity'> {
  return {
    authenticate: (request) => read(request.token),
    userOf: (context) => context.user,
    identity: {
      expiresAtOf: (context) => context.expiresAt,
      topicsOf: (context) => context.topics,
      methodsOf: (context) => context.methods,
      ...identity,
    },
  };
}
