import fc from "fast-check";

// Property tests run the same cases on every CI run (a red CI must mean a regression, not
// an unlucky draw). Explore new cases locally with FC_SEED=<n> or FC_SEED=random.
const seed = process.env.FC_SEED === "random" ? Date.now() : Number(process.env.FC_SEED ?? 20261201);
fc.configureGlobal({ seed });
