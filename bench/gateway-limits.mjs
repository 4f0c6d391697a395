// The limits every bench gateway changes from the defaults, and only these: the abuse limits
// raised out of the way of one load generator on one IP, which opens thousands of connections
// (many at once) and sends far more than 1,000 calls/s on one: the per-IP connection cap and
// connection rate, the per-connection message rate and the byte budgets (their token buckets
// still run on every message), and the per-IP rate of subscribes to new topics (the scale run's
// 10,000 topics come from a few addresses).
export const benchLimits = Object.freeze({
  maxConnectionsPerIp: 100_000,
  connectionsPerSecondPerIp: 0,
  newTopicSubscribesPerSecondPerIp: 0,
  ratePerSecond: 1e9,
  rateBurst: 1e9,
  bytesPerSecond: 1e12,
  bytesPerSecondPerIp: 1e12,
});
