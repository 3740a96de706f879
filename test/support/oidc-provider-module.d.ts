// node-oidc-provider ships no types since its ninth major: test/support/oidc-provider.ts uses the
// few parts it needs through a typed wrapper of its own.
declare module "oidc-provider";
