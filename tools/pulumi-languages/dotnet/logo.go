package dotnet

import _ "embed" // for defaultLogo

// defaultLogo is the package icon (logo.png) of SDKs whose schema has no logoUrl: the file Pulumi's generator
// downloads for them, pulumi/pulumi@dbc96206bec722b7791a22ff50e895ab7c0abdc0 sdk/dotnet/pulumi_logo_64x64.png,
// embedded so that generating a .NET SDK needs no network (not a change in what is generated).
//
//go:embed pulumi_logo_64x64.png
var defaultLogo []byte
