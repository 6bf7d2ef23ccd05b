// Package limits knows the EC2 network limits enaprobe measures against:
// per-instance-type baseline and burst bandwidth (an embedded snapshot of the
// AWS documentation, amendable at run time), the per-flow caps, the
// internet-gateway cap, the link-local service addresses and their shared
// packets-per-second allowance, rate parsing and formatting, and a
// read-once IMDSv2 client that discovers the instance it runs on.
//
// Every number here comes from shared/AWS-LIMITS.md or from the AWS
// pages named in data/instance_types.csv; none is derived by pattern.
package limits
