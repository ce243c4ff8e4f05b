// Self-hosted GitHub Actions runners on Kubernetes, replaced without killing a job.
package actionsrunners
