// Personal organizations through the API (seed 004, Notes). A signed-in person opens one for
// themselves: they become its owner (admin implicitly) under their own email and name, and get a
// token for it, shown once. Users belong to one organization, so the owner is a new user row of
// the new organization; nothing of the caller's organization goes with it.
//
// Each one is a fresh admin with a fresh rate-limit allowance, so they are limited per PERSON:
// - a cap on the live personal organizations a person owns (config personalOrganizations.perPerson);
// - a creation rate (a token bucket: createBurst at once, createPerHour after it).
// The person is the email: every personal organization's owner is a user row carrying the email
// of whoever opened it, so a chain (a personal organization opened with the token of another,
// opened with the token of another, ...) is one person all along, however long it is.

import { randomBytes } from "node:crypto";
import { z } from "zod";
import type { SignedInAuthz } from "../authz/authz.js";
import { InvalidStateError, LimitExceededError } from "../errors.js";
import type { Config } from "../infra/config.js";
import type { Database } from "../infra/db.js";
import { TokenBuckets, retryAfterSeconds, type Take } from "../infra/token-buckets.js";
import { createPersonalOrganization, slugify } from "./accounts.js";
import { DisplayName } from "./input-rules.js";
import { parseInput } from "./parse.js";

export const CreatePersonalOrganizationInput = z.object({ name: DisplayName });

export type PersonalOrganizationLimits = Config["personalOrganizations"];

/**
 * How fast one person may open personal organizations. The app sets one shared by every API
 * process (src/infra/shared-limits.ts, through useCreationLimiter); in-process otherwise.
 */
export interface CreationLimiter {
  take(person: string): Promise<Take>;
}

export function inProcessCreationLimiter(limits: PersonalOrganizationLimits): CreationLimiter {
  // A bucket of createBurst refilling createPerHour an hour; 0 an hour: only the burst, ever (per process).
  const buckets = new TokenBuckets(Math.max(limits.createPerHour / 3600, 1e-9), limits.createBurst);
  return { take: async (person) => buckets.take(person) };
}

/** One limiter per configuration (per app): a process running two apps keeps them apart. */
const limiters = new WeakMap<PersonalOrganizationLimits, CreationLimiter>();

/** The limiter for a configuration's creations: the app's shared one (Redis with REDIS_URL), set at start. */
export function useCreationLimiter(limits: PersonalOrganizationLimits, limiter: CreationLimiter): void {
  limiters.set(limits, limiter);
}
const limiterFor = (limits: PersonalOrganizationLimits) => {
  let limiter = limiters.get(limits);
  if (!limiter) limiters.set(limits, (limiter = inProcessCreationLimiter(limits)));
  return limiter;
};

/** The person behind a request: the email, as every owner row of their chain carries it. */
export const personKey = (email: string) => email.trim().toLowerCase();

/**
 * The slug is the name's, plus a random suffix chosen here: a caller never picks a slug, so a
 * taken one can never tell them that some other organization exists.
 */
const personalSlug = (name: string) => `${slugify(name).slice(0, 48)}-${randomBytes(4).toString("hex")}`;

export async function createOwnPersonalOrganization(db: Database, authz: SignedInAuthz, raw: unknown, limits: PersonalOrganizationLimits, limiter: CreationLimiter = limiterFor(limits)) {
  const input = parseInput(CreatePersonalOrganizationInput, raw);
  await authz.requireMember();
  const viewer = authz.viewer;
  if (viewer.isServiceAccount) {
    throw new InvalidStateError(
      "User",
      "service_account",
      "A service account cannot own a personal organization: a personal organization's owner is a person.",
    );
  }
  const person = personKey(viewer.email);
  const taken = await limiter.take(person);
  if (!taken.ok) {
    const seconds = retryAfterSeconds(taken.retryAfterMs);
    throw new LimitExceededError(limits.createBurst, seconds, `Personal organizations are opened at most ${limits.createBurst} at once and ${limits.createPerHour} an hour per person: try again in ${seconds} s.`);
  }
  return oneAtATime(person, () => openUnderCap(db, person, input.name, viewer, limits));
}

/**
 * One person's openings on this process run one after the other, so they queue here rather than
 * each holding a pooled connection in a transaction that waits for the advisory lock (which
 * orders them across processes).
 */
const queues = new Map<string, Promise<unknown>>();
function oneAtATime<T>(key: string, run: () => Promise<T>): Promise<T> {
  const previous = queues.get(key) ?? Promise.resolve();
  const next = previous.catch(() => {}).then(run);
  queues.set(key, next);
  void next.catch(() => {}).finally(() => {
    if (queues.get(key) === next) queues.delete(key);
  });
  return next;
}

async function openUnderCap(db: Database, person: string, name: string, viewer: { email: string; name: string }, limits: PersonalOrganizationLimits) {
  return db.prisma.$transaction(async (tx) => {
    // One person's openings queue on one lock, so concurrent ones cannot all see room under the cap.
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`personal-org:${person}`}, 0))`;
    const [row] = await tx.$queryRaw<{ owned: number }[]>`
      SELECT count(*)::int AS owned
        FROM organizations o JOIN users u ON u.id = o."ownerUserId"
       WHERE o.personal AND o."deletedAt" IS NULL AND lower(u.email) = ${person}`;
    const owned = row?.owned ?? 0;
    if (owned >= limits.perPerson) {
      throw new LimitExceededError(
        limits.perPerson,
        null,
        `You already own ${owned} personal organization(s), the most one person may (${limits.perPerson}): delete one to open another.`,
      );
    }
    return createPersonalOrganization(tx, {
      orgName: name,
      slug: personalSlug(name),
      owner: { email: viewer.email, name: viewer.name },
    });
  });
}
