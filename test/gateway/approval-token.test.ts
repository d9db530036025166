import { createHmac } from "node:crypto";
import { generateKeyPair, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import {
  ApprovalTokenConfigError,
  argumentHash,
  claimsMatch,
  createCedarGate,
  DEFAULT_GATEWAY_POLICIES,
  mintApprovalToken,
  verifyApprovalToken,
  type ApprovalTokenClaims,
} from "../../src/gateway/index.js";

// Seed 003, "Resume" (Mint, Execute) and "Resuming from the agent side".

const SECRET = "0123456789abcdef0123456789abcdef-approval-secret";
const T0 = new Date("2026-12-01T12:00:00.000Z");
const at = (ms: number) => new Date(T0.getTime() + ms);

const claims: ApprovalTokenClaims = {
  approvalId: "apr_01",
  workspaceId: "ws_01",
  keyId: "vk_01",
  tool: "github.delete_repo",
  argumentHash: argumentHash({ repo: "acme/api" }),
  idempotencyKey: "idem-01",
};

const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
const nowSeconds = Math.floor(T0.getTime() / 1000);
const wirePayload = {
  approval_id: claims.approvalId,
  workspace_id: claims.workspaceId,
  key_id: claims.keyId,
  tool: claims.tool,
  argument_hash: claims.argumentHash,
  idempotency_key: claims.idempotencyKey,
  iss: "obol-control",
  aud: "obol-gateway",
  iat: nowSeconds,
  exp: nowSeconds + 300,
};
const key = new TextEncoder().encode(SECRET);

describe("approval tokens", () => {
  it("a minted token verifies and carries its bound claims", async () => {
    const token = await mintApprovalToken(SECRET, claims, { now: T0 });
    const result = await verifyApprovalToken(SECRET, token, { now: at(1000) });
    expect(result).toEqual({ ok: true, claims, expiresAt: at(300_000) });
  });

  it("expiry is enforced with no clock-skew leeway", async () => {
    const token = await mintApprovalToken(SECRET, claims, { now: T0, ttlSeconds: 300 });
    expect((await verifyApprovalToken(SECRET, token, { now: at(299_999) })).ok).toBe(true);
    // now >= exp is expired: at exp itself, and 1 s past it.
    expect(await verifyApprovalToken(SECRET, token, { now: at(300_000) })).toEqual({ ok: false, reason: "expired" });
    expect(await verifyApprovalToken(SECRET, token, { now: at(301_000) })).toEqual({ ok: false, reason: "expired" });
  });

  it("a token with a wrong issuer fails", async () => {
    const token = await mintApprovalToken(SECRET, claims, { now: T0, issuer: "someone-else" });
    expect(await verifyApprovalToken(SECRET, token, { now: T0 })).toEqual({ ok: false, reason: "wrong_issuer" });
  });

  it("a token with a wrong audience fails", async () => {
    const token = await mintApprovalToken(SECRET, claims, { now: T0, audience: "obol-control" });
    expect(await verifyApprovalToken(SECRET, token, { now: T0 })).toEqual({ ok: false, reason: "wrong_audience" });
  });

  it("a token with a wrong alg fails: none, RS256 and HS512 are refused", async () => {
    const unsigned = `${b64({ alg: "none", typ: "JWT" })}.${b64(wirePayload)}.`;
    expect(await verifyApprovalToken(SECRET, unsigned, { now: T0 })).toEqual({ ok: false, reason: "bad_signature" });

    const { privateKey } = await generateKeyPair("RS256");
    const rs256 = await new SignJWT(wirePayload).setProtectedHeader({ alg: "RS256" }).sign(privateKey);
    expect(await verifyApprovalToken(SECRET, rs256, { now: T0 })).toEqual({ ok: false, reason: "bad_signature" });

    const hs512 = await new SignJWT(wirePayload).setProtectedHeader({ alg: "HS512" }).sign(key);
    expect(await verifyApprovalToken(SECRET, hs512, { now: T0 })).toEqual({ ok: false, reason: "bad_signature" });
  });

  it("a token signed with another secret or tampered with fails as bad_signature", async () => {
    const other = await mintApprovalToken("another-secret-that-is-32-bytes-long!!", claims, { now: T0 });
    expect(await verifyApprovalToken(SECRET, other, { now: T0 })).toEqual({ ok: false, reason: "bad_signature" });

    const [header, , signature] = (await mintApprovalToken(SECRET, claims, { now: T0 })).split(".");
    const tampered = `${header}.${b64({ ...wirePayload, tool: "github.delete_org" })}.${signature}`;
    expect(await verifyApprovalToken(SECRET, tampered, { now: T0 })).toEqual({ ok: false, reason: "bad_signature" });
  });

  it("garbage is malformed", async () => {
    for (const token of ["", "not-a-jwt", "a.b.c", "a.b"]) {
      expect(await verifyApprovalToken(SECRET, token, { now: T0 })).toEqual({ ok: false, reason: "malformed" });
    }
    // Correctly signed, but the payload is not a JSON claims set.
    const signingInput = `${b64({ alg: "HS256" })}.${Buffer.from("not json").toString("base64url")}`;
    const signature = createHmac("sha256", key).update(signingInput).digest("base64url");
    expect(await verifyApprovalToken(SECRET, `${signingInput}.${signature}`, { now: T0 })).toEqual({ ok: false, reason: "malformed" });
  });

  it("a token missing a bound claim or exp fails as missing_claim", async () => {
    const { key_id: _dropped, ...withoutKey } = wirePayload;
    const noKey = await new SignJWT(withoutKey).setProtectedHeader({ alg: "HS256" }).sign(key);
    expect(await verifyApprovalToken(SECRET, noKey, { now: T0 })).toEqual({ ok: false, reason: "missing_claim" });

    const { exp: _exp, ...withoutExp } = wirePayload;
    const noExp = await new SignJWT(withoutExp).setProtectedHeader({ alg: "HS256" }).sign(key);
    expect(await verifyApprovalToken(SECRET, noExp, { now: T0 })).toEqual({ ok: false, reason: "missing_claim" });
  });

  it("refuses a secret shorter than 32 bytes and a non-positive ttl", async () => {
    await expect(mintApprovalToken("short", claims)).rejects.toThrow(ApprovalTokenConfigError);
    await expect(verifyApprovalToken("short", "x.y.z")).rejects.toThrow(ApprovalTokenConfigError);
    await expect(mintApprovalToken(SECRET, claims, { ttlSeconds: 0 })).rejects.toThrow(ApprovalTokenConfigError);
  });

  it("every bound claim matching the live request counts as a match", () => {
    expect(claimsMatch(claims, { ...claims })).toEqual({ ok: true });
  });

  it.each(Object.keys(claims) as (keyof ApprovalTokenClaims)[])(
    "any bound-claim mismatch falls back to not approved: %s",
    (name) => {
      const live = { ...claims, [name]: `${claims[name]}x` };
      expect(claimsMatch(claims, live)).toEqual({ ok: false, mismatched: [name] });
    },
  );

  it("a mismatched token leaves the call unapproved, so Cedar's gate re-issues a ticket", async () => {
    const token = await mintApprovalToken(SECRET, claims, { now: T0 });
    const verified = await verifyApprovalToken(SECRET, token, { now: T0 });
    const live = { ...claims, argumentHash: argumentHash({ repo: "acme/billing" }) };
    const approved = verified.ok && claimsMatch(verified.claims, live).ok;
    const gate = createCedarGate(DEFAULT_GATEWAY_POLICIES);
    const decision = gate.decide({
      principal: { type: "VirtualKey", id: live.keyId },
      action: { type: "Action", id: "tools/call" },
      resource: { type: "Tool", id: live.tool },
      context: {},
      destructive: true,
      environment: "prod",
      production: true,
      alreadyApproved: approved,
    });
    expect(approved).toBe(false);
    expect(decision.decision).toBe("approval_required");
  });
});
