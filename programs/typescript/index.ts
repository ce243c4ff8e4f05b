import * as pulumi from "@pulumi/pulumi";
import * as runners from "@pulumi-actions-runners/actions-runners";

const config = new pulumi.Config();
const githubUrl = config.require("githubUrl");
const githubToken = config.requireSecret("githubToken");

const registration = new runners.RegistrationToken("registration", {
    githubUrl,
    githubToken,
    refreshBeforeSeconds: config.getNumber("tokenRefreshBeforeSeconds") ?? 1800,
});

// `pulumi config set maxUnavailable 3` stores the string "3": a number of runners, not a percentage.
const maxUnavailable = config.get("maxUnavailable") ?? "25%";

const pool = new runners.RunnerPool("pool", {
    githubUrl,
    githubToken,
    namespace: config.get("namespace") ?? "actions-runners",
    replicas: config.getNumber("runners") ?? 3,
    maxUnavailable: /^\d+$/.test(maxUnavailable) ? Number(maxUnavailable) : maxUnavailable,
    registrationToken: registration.token,
    registrationTokenExpiresAt: registration.expiresAt,
    labels: ["pulumi", "typescript"],
    gracePeriodSeconds: config.getNumber("gracePeriodSeconds") ?? 30,
});

export const runnerNames = pool.runners.apply((all) => (all ?? []).map((runner) => runner.name));
export const tokenExpiresAt = registration.expiresAt;
