# train stage rules
