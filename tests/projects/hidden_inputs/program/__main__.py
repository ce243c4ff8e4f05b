"""Two pools of the simulator's repository whose spec holds a secret: pool "image" registers with an image given
as a secret (a private registry's path, say), pool "env" with a pod template whose runner container has a secret
environment variable, which Pulumi's preview hides with the whole containers list."""

import pulumi

from pulumi_actions_runners import RegistrationToken, RunnerPool

config = pulumi.Config()
github_url = config.require("githubUrl")
credential = {"github_token": config.require_secret("githubToken")}
settings = {
    "github_url": github_url,
    "namespace": config.require("namespace"),
    "kubeconfig": config.require("kubeconfig"),
    "replicas": 2,
    "max_unavailable": 1,
    "labels": config.require("labels").split(","),
    "grace_period_seconds": 1,
    **credential,
}
token = RegistrationToken("registration", github_url=github_url, refresh_before_seconds=0, **credential)
RunnerPool("image", registration_token=token, image=pulumi.Output.secret(config.require("image")), **settings)
RunnerPool(
    "env",
    registration_token=token,
    pod_template={
        "spec": {
            "containers": [
                {"name": "runner", "env": [{"name": "NPM_TOKEN", "value": config.require_secret("npmToken")}]}
            ]
        }
    },
    **settings,
)
