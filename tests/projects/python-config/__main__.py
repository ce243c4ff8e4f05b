import pulumi

pulumi.export("github_url", pulumi.Config().require("githubUrl"))
