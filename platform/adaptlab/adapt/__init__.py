"""adaptlab.adapt"""
