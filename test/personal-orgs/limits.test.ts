// Personal organizations are limited per person: each is a fresh admin with a fresh rate-limit
// allowance, so one person owns at most COUNTERSIGN_PERSONAL_ORGS_PER_PERSON live ones (default 3)
// however they open them — in a row, at once, or as a chain where each is opened with the
// previous one's token — and opens them at a limited rate.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/infra/config.js";
import { addMember, createOrg } from "../helpers/fixtures.js";
import { startTestApp, type TestApp } from "../helpers/harness.js";

const CREATE = `mutation($input: CreatePersonalOrganizationInput!) {
  createPersonalOrganization(input: $input) {
    __typename
    ... on MutationCreatePersonalOrganizationSuccess { data { token organization { id } } }
    ... on LimitExceededError { code message limit retryAfterSeconds }
    ... on Error { code message }
  }
}`;

let t: TestApp;
let fast: TestApp;

beforeAll(async () => {
  // The cap alone: a burst large enough never to be the reason.
  t = await startTestApp({ env: { COUNTERSIGN_PERSONAL_ORG_CREATE_BURST: "100" } });
  // The rate alone: a cap large enough never to be the reason, two at once, none more this hour.
  fast = await startTestApp({ env: { COUNTERSIGN_PERSONAL_ORGS_PER_PERSON: "100", COUNTERSIGN_PERSONAL_ORG_CREATE_BURST: "2", COUNTERSIGN_PERSONAL_ORG_CREATE_PER_HOUR: "1" } });
});
afterAll(async () => {
  await t?.close();
  await fast?.close();
});

const open = async (app: TestApp, token: string, name = "Mine") => (await app.gql(CREATE, { input: { name } }, token)).data.createPersonalOrganization;

/** A person: a member (no role) of an ordinary organization. */
async function person(app: TestApp) {
  const org = await createOrg(app.db);
  return addMember(app.db, org.orgId);
}

describe("one person owns at most three personal organizations", () => {
  it("the default cap is 3 and the creation rate is limited (config)", () => {
    const config = loadConfig({});
    expect(config.personalOrganizations).toEqual({ perPerson: 3, createBurst: 3, createPerHour: 6 });
  });

  it("a member with no role opens 3 in a row; the 4th to the 40th are LimitExceededError with limit 3", async () => {
    const me = await person(t);
    const answers = [];
    for (let i = 0; i < 40; i++) answers.push(await open(t, me.token));
    expect(answers.slice(0, 3).map((a) => a.__typename)).toEqual(Array(3).fill("MutationCreatePersonalOrganizationSuccess"));
    for (const refused of answers.slice(3)) expect(refused).toMatchObject({ __typename: "LimitExceededError", code: "LIMIT_EXCEEDED", limit: 3, retryAfterSeconds: null });
  });

  it("40 at once still open exactly 3", async () => {
    const me = await person(t);
    const answers = await Promise.all(Array.from({ length: 40 }, () => open(t, me.token)));
    expect(answers.filter((a) => a.__typename === "MutationCreatePersonalOrganizationSuccess")).toHaveLength(3);
    expect(answers.filter((a) => a.__typename === "LimitExceededError")).toHaveLength(37);
  });

  it("a chain of 10, each opened with the previous one's fresh token, is one person: it stops at 3", async () => {
    const me = await person(t);
    let token = me.token;
    const answers = [];
    for (let i = 0; i < 10; i++) {
      const answer = await open(t, token);
      answers.push(answer.__typename);
      if (answer.__typename === "MutationCreatePersonalOrganizationSuccess") token = answer.data.token;
    }
    expect(answers).toEqual([...Array(3).fill("MutationCreatePersonalOrganizationSuccess"), ...Array(7).fill("LimitExceededError")]);
  });

  it("deleting one frees its place; another person is not affected", async () => {
    const me = await person(t);
    const tokens: string[] = [];
    for (let i = 0; i < 3; i++) tokens.push((await open(t, me.token)).data.token);
    expect((await open(t, me.token)).__typename).toBe("LimitExceededError");
    const other = await person(t);
    expect((await open(t, other.token)).__typename).toBe("MutationCreatePersonalOrganizationSuccess");
    const deleted = await t.gql(`mutation { deleteOrganization { __typename } }`, {}, tokens[0]);
    expect(deleted.data.deleteOrganization.__typename).toBe("MutationDeleteOrganizationSuccess");
    expect((await open(t, me.token)).__typename).toBe("MutationCreatePersonalOrganizationSuccess");
  });
});

describe("a person opens personal organizations at a limited rate", () => {
  it("burst 2, 1 an hour: the third in a row is LimitExceededError with the time to wait", async () => {
    const me = await person(fast);
    expect((await open(fast, me.token)).__typename).toBe("MutationCreatePersonalOrganizationSuccess");
    expect((await open(fast, me.token)).__typename).toBe("MutationCreatePersonalOrganizationSuccess");
    const third = await open(fast, me.token);
    expect(third).toMatchObject({ __typename: "LimitExceededError", code: "LIMIT_EXCEEDED", limit: 2 });
    expect(third.retryAfterSeconds).toBeGreaterThan(60);
    expect(third.retryAfterSeconds).toBeLessThanOrEqual(3600);
  });

  it("the rate is per person, across the chain: the chain's second token meets the same bucket", async () => {
    const me = await person(fast);
    const first = await open(fast, me.token);
    const second = await open(fast, first.data.token);
    expect(second.__typename).toBe("MutationCreatePersonalOrganizationSuccess");
    expect((await open(fast, second.data.token)).__typename).toBe("LimitExceededError");
    // Someone else still opens theirs.
    expect((await open(fast, (await person(fast)).token)).__typename).toBe("MutationCreatePersonalOrganizationSuccess");
  });
});
