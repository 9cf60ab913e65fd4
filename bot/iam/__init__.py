"""What Pitcrew may do in AWS: the one table of its actions (`actions`), the policies generated from it for an org's
role (`policy`), the CloudFormation template an org deploys (`onboard`), the translation of a refusal into what to
deploy (`denied`), and the checks of an org's setup (`doctor`, its AWS probes in `probes`)."""
