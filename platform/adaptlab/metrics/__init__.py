"""adaptlab.metrics"""
